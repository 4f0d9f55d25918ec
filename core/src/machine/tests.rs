//! The session machine's rules, fed events in chosen and in generated orders.

use std::time::{Duration, Instant, SystemTime};

use proptest::prelude::*;

use super::*;

const DRAIN: Duration = Duration::from_millis(1000);
const GRACE: Duration = Duration::from_millis(2000);
const RECHECK: Duration = Duration::from_millis(10);
const LINGER: Duration = Duration::from_secs(5);

/// A driver over simulated time and a simulated tree.
struct Sim {
    m: Machine<i32>,
    now: Now,
    /// The tree has members.
    tree_alive: bool,
    /// The tree obeys SIGTERM (else only SIGKILL empties it).
    obeys_term: bool,
    /// SIGKILL empties the tree (else it survives).
    killable: bool,
    /// Every action given, with the time.
    log: Vec<(Instant, Action<i32>)>,
}

impl Sim {
    fn new(rules: Rules) -> Sim {
        let now = Now {
            at: Instant::now(),
            wall: SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
        };
        Sim {
            m: Machine::new(rules, now),
            now,
            tree_alive: true,
            obeys_term: false,
            killable: true,
            log: Vec::new(),
        }
    }

    fn shim() -> Sim {
        Sim::new(shim_rules(GRACE))
    }

    fn reader() -> Sim {
        Sim::new(Rules {
            idle_drain: DRAIN,
            deadline: None,
            kill: None,
            kill_leftovers: false,
            linger_recheck: LINGER,
        })
    }

    fn advance(&mut self, by: Duration) {
        self.now.at += by;
        self.now.wall += by;
    }

    /// Feeds `event` and answers the machine's questions, as a driver does.
    fn feed(&mut self, event: Event<i32>) {
        let mut queue = vec![event];
        while let Some(event) = queue.pop() {
            // Never finished while a kill the machine carries is under way: only the
            // look that finds the tree empty (or the probe's end) lets it finish.
            let was_under_way = self.m.kill_under_way();
            let found_empty = matches!(event, Event::Tree { empty: true });
            let actions = self.m.handle(self.now, event);
            if actions.iter().any(|a| matches!(a, Action::Finish { .. })) {
                assert!(
                    !was_under_way || found_empty || actions.contains(&Action::Survivors),
                    "finished during a kill"
                );
            }
            for action in actions {
                match action {
                    Action::LookAtTree => queue.push(Event::Tree {
                        empty: !self.tree_alive,
                    }),
                    Action::Terminate { .. } if self.obeys_term => self.tree_alive = false,
                    Action::Escalate { .. } if self.killable => self.tree_alive = false,
                    _ => {}
                }
                self.log.push((self.now.at, action));
            }
        }
    }

    /// Sleeps until the machine's timeout (at most `cap`) and ticks.
    fn sleep(&mut self, cap: Duration) {
        let wait = self
            .m
            .poll_timeout(self.now)
            .map_or(cap, |t| t.saturating_duration_since(self.now.at).min(cap));
        self.advance(wait);
        self.feed(Event::Tick);
    }

    fn finishes(&self) -> Vec<(Option<i32>, Option<KillSource>, bool)> {
        self.log
            .iter()
            .filter_map(|(_, a)| match a {
                Action::Finish {
                    exit,
                    killed_by,
                    eof,
                } => Some((*exit, *killed_by, *eof)),
                _ => None,
            })
            .collect()
    }

    fn count(&self, want: &Action<i32>) -> usize {
        self.log.iter().filter(|(_, a)| a == want).count()
    }
}

fn shim_rules(grace: Duration) -> Rules {
    Rules {
        idle_drain: DRAIN,
        deadline: None,
        kill: Some(KillRules {
            grace,
            recheck: RECHECK,
        }),
        kill_leftovers: false,
        linger_recheck: LINGER,
    }
}

#[test]
fn b13_exit_before_eof_finishes_at_eof() {
    let mut sim = Sim::reader();
    sim.feed(Event::Output);
    sim.feed(Event::Exited(3));
    assert!(sim.finishes().is_empty(), "output is not done yet");
    sim.advance(Duration::from_millis(100));
    sim.feed(Event::OutputEnded { eof: true });
    assert_eq!(sim.finishes(), vec![(Some(3), None, true)]);
}

#[test]
fn b13_eof_before_exit_finishes_at_exit() {
    let mut sim = Sim::reader();
    sim.feed(Event::OutputEnded { eof: true });
    assert!(!sim.m.reading());
    assert_eq!(
        sim.m.poll_timeout(sim.now),
        None,
        "nothing to wait for but the exit"
    );
    sim.feed(Event::Exited(0));
    assert_eq!(sim.finishes(), vec![(Some(0), None, true)]);
}

#[test]
fn b13_idle_drain_runs_from_the_last_output() {
    let mut sim = Sim::reader();
    sim.feed(Event::Exited(0));
    sim.advance(Duration::from_millis(600));
    sim.feed(Event::Output);
    sim.advance(Duration::from_millis(600));
    sim.feed(Event::Tick);
    assert!(sim.finishes().is_empty(), "output 600 ms ago keeps it open");
    assert_eq!(
        sim.m.poll_timeout(sim.now),
        Some(sim.now.at + Duration::from_millis(400))
    );
    sim.sleep(Duration::from_secs(10));
    assert_eq!(sim.finishes(), vec![(Some(0), None, false)]);
}

#[test]
fn b13_kill_after_exit_drains_and_finishes_at_once() {
    let mut sim = Sim::reader();
    sim.feed(Event::Kill(Some(KillSource::ProcessKill)));
    assert!(
        sim.finishes().is_empty(),
        "a kill before the exit waits for it"
    );
    sim.feed(Event::Exited(-9));
    assert_eq!(sim.count(&Action::DrainNow), 1);
    assert_eq!(
        sim.finishes(),
        vec![(Some(-9), None, false)],
        "the reader does not carry kills, so reports no source"
    );
    assert!(sim.m.released(), "a reader has nothing to linger over");
}

#[test]
fn b15_shim_kill_terminates_waits_the_grace_then_escalates() {
    let mut sim = Sim::shim();
    let start = sim.now.at;
    sim.feed(Event::Kill(Some(KillSource::ProcessKill)));
    assert_eq!(sim.log[0].1, Action::Terminate { first: true });
    assert!(sim.count(&Action::Escalate { first: true }) == 0);
    while sim.count(&Action::Escalate { first: true }) == 0 {
        sim.sleep(Duration::from_secs(10));
        assert!(sim.now.at <= start + GRACE, "escalated late");
    }
    assert_eq!(
        sim.now.at,
        start + GRACE,
        "escalated exactly at the grace's end"
    );
    assert!(
        sim.count(&Action::Terminate { first: false }) > 100,
        "newcomers looked for"
    );
    // The killed job's output ends, then its exit is reaped.
    sim.feed(Event::OutputEnded { eof: true });
    sim.feed(Event::Exited(-9));
    assert_eq!(
        sim.finishes(),
        vec![(Some(-9), Some(KillSource::ProcessKill), true)]
    );
}

#[test]
fn b15_session_does_not_finish_while_its_kill_is_under_way() {
    let mut sim = Sim::shim();
    sim.feed(Event::Kill(Some(KillSource::OperatorStop)));
    // The main process went at once; the rest of the tree ignores SIGTERM.
    sim.feed(Event::Exited(-15));
    sim.feed(Event::OutputEnded { eof: false });
    assert!(sim.finishes().is_empty());
    for _ in 0..1000 {
        if !sim.finishes().is_empty() {
            break;
        }
        sim.sleep(Duration::from_secs(10));
    }
    let escalated = sim
        .log
        .iter()
        .find(|(_, a)| *a == Action::Escalate { first: true })
        .map(|(t, _)| *t);
    let finished = sim
        .log
        .iter()
        .find(|(_, a)| matches!(a, Action::Finish { .. }))
        .map(|(t, _)| *t);
    assert!(escalated.is_some() && finished >= escalated);
    assert_eq!(
        sim.finishes(),
        vec![(Some(-15), Some(KillSource::OperatorStop), false)]
    );
}

#[test]
fn b15_zero_grace_escalates_at_once_and_survivors_are_reported() {
    let mut sim = Sim::new(shim_rules(Duration::ZERO));
    sim.killable = false;
    sim.feed(Event::Kill(None));
    assert_eq!(sim.log[0].1, Action::Terminate { first: true });
    assert_eq!(sim.log[1].1, Action::Escalate { first: true });
    let start = sim.now.at;
    while sim.count(&Action::Survivors) == 0 {
        sim.sleep(Duration::from_secs(10));
    }
    assert_eq!(sim.now.at, start + SURVIVOR_PROBE);
}

#[test]
fn second_kill_during_grace_keeps_the_course_and_the_source() {
    let mut sim = Sim::shim();
    sim.feed(Event::Kill(Some(KillSource::ProcessKill)));
    sim.advance(Duration::from_millis(500));
    sim.feed(Event::Kill(Some(KillSource::OperatorStop)));
    assert_eq!(sim.count(&Action::Terminate { first: true }), 1);
    sim.feed(Event::Exited(-15));
    while sim.finishes().is_empty() {
        sim.sleep(Duration::from_secs(10));
    }
    assert_eq!(sim.finishes()[0].1, Some(KillSource::ProcessKill));
}

#[test]
fn time_limit_kills_as_time_limit_and_rechecks_the_wall_clock() {
    let mut rules = shim_rules(GRACE);
    let mut sim = Sim::new(rules);
    rules.deadline = Some(sim.now.wall + Duration::from_secs(3600));
    sim.m = Machine::new(rules, sim.now);
    assert_eq!(
        sim.m.poll_timeout(sim.now),
        Some(sim.now.at + DEADLINE_RECHECK),
        "a far deadline is read again within the recheck"
    );
    // A clock step forward past the deadline is noticed at the next tick.
    sim.now.wall += Duration::from_secs(3600);
    sim.feed(Event::Tick);
    assert_eq!(sim.log[0].1, Action::Terminate { first: true });
    sim.obeys_term = true;
    sim.sleep(Duration::from_secs(10));
    // An exit reaped before the end of output: after a kill, what is buffered is
    // read and the session finishes at once.
    sim.feed(Event::Exited(-15));
    assert_eq!(sim.count(&Action::DrainNow), 1);
    assert_eq!(
        sim.finishes(),
        vec![(Some(-15), Some(KillSource::TimeLimit), false)]
    );
}

fn reader_with_deadline(sim_deadline_in: Duration) -> Sim {
    let mut sim = Sim::reader();
    let rules = Rules {
        deadline: Some(sim.now.wall + sim_deadline_in),
        ..sim.m.rules
    };
    sim.m = Machine::new(rules, sim.now);
    sim
}

fn kill_requests(sim: &Sim) -> usize {
    sim.count(&Action::RequestKill {
        source: KillSource::TimeLimit,
    })
}

#[test]
fn b17_in_process_time_limit_asks_for_the_kill_once_at_the_deadline() {
    // The in-process reader's machine carries no kills: at the deadline it asks its
    // driver (the registry's tree kill) for one, as `time_limit`, once.
    let mut sim = reader_with_deadline(Duration::from_secs(3));
    sim.feed(Event::Output);
    assert_eq!(
        sim.m.poll_timeout(sim.now),
        Some(sim.now.at + Duration::from_secs(3)),
        "the reader sleeps until the deadline"
    );
    sim.sleep(Duration::from_secs(2));
    assert_eq!(kill_requests(&sim), 0, "not before the deadline");
    sim.sleep(Duration::from_secs(10));
    assert_eq!(kill_requests(&sim), 1, "{:?}", sim.log);
    assert_eq!(
        sim.count(&Action::Terminate { first: true }),
        0,
        "the reader signals nothing itself"
    );
    // The registry's kill comes back as a kill request; the exit then finishes the
    // session at once, after what is buffered, with the registry's own source.
    sim.feed(Event::Kill(None));
    sim.feed(Event::Exited(-15));
    assert_eq!(sim.count(&Action::DrainNow), 1);
    assert_eq!(sim.finishes(), vec![(Some(-15), None, false)]);
    sim.sleep(Duration::from_secs(120));
    assert_eq!(kill_requests(&sim), 1, "the time limit fires once");
}

#[test]
fn b17_in_process_time_limit_rechecks_the_wall_clock() {
    let mut sim = reader_with_deadline(Duration::from_secs(3600));
    assert_eq!(
        sim.m.poll_timeout(sim.now),
        Some(sim.now.at + DEADLINE_RECHECK),
        "a far deadline is read again within the recheck"
    );
    sim.sleep(Duration::from_secs(3600));
    assert_eq!(kill_requests(&sim), 0);
    // A clock step (or a suspend) past the deadline is noticed at the next wake-up.
    sim.now.wall += Duration::from_secs(3600);
    sim.sleep(Duration::from_secs(3600));
    assert_eq!(kill_requests(&sim), 1);
}

#[test]
fn b28_in_process_time_limit_already_past_asks_at_once() {
    // A re-adopted session whose deadline passed while no daemon ran.
    let mut sim = Sim::reader();
    let rules = Rules {
        deadline: Some(sim.now.wall - Duration::from_secs(5)),
        ..sim.m.rules
    };
    sim.m = Machine::new(rules, sim.now);
    sim.feed(Event::Tick);
    assert_eq!(kill_requests(&sim), 1);
}

#[test]
fn b17_in_process_time_limit_does_not_fire_after_the_exit() {
    // Once the direct child exited, the time limit has nothing to end (an in-process
    // session holds no leftovers): the session finishes by the end-of-session rule.
    let mut sim = reader_with_deadline(Duration::from_millis(500));
    sim.feed(Event::Exited(0));
    sim.sleep(Duration::from_secs(10));
    sim.sleep(Duration::from_secs(10));
    assert_eq!(kill_requests(&sim), 0, "{:?}", sim.log);
    assert_eq!(sim.finishes(), vec![(Some(0), None, false)]);
}

#[test]
fn time_limit_during_a_kill_changes_nothing() {
    let mut rules = shim_rules(GRACE);
    let mut sim = Sim::new(rules);
    rules.deadline = Some(sim.now.wall + Duration::from_millis(500));
    sim.m = Machine::new(rules, sim.now);
    sim.feed(Event::Kill(Some(KillSource::KillAll)));
    while sim.count(&Action::Escalate { first: true }) == 0 {
        sim.sleep(Duration::from_secs(10));
    }
    assert_eq!(sim.count(&Action::Terminate { first: true }), 1);
    sim.feed(Event::Exited(-9));
    sim.feed(Event::OutputEnded { eof: true });
    assert_eq!(sim.finishes()[0].1, Some(KillSource::KillAll));
}

#[test]
fn b13_kill_leftovers_kills_what_is_left_before_finishing() {
    let mut rules = shim_rules(GRACE);
    rules.kill_leftovers = true;
    let mut sim = Sim::new(rules);
    sim.obeys_term = true;
    sim.feed(Event::Exited(0));
    sim.feed(Event::OutputEnded { eof: true });
    assert_eq!(sim.count(&Action::Terminate { first: true }), 1);
    assert_eq!(sim.finishes(), vec![(Some(0), None, true)]);
    assert!(sim.m.released(), "the killed tree is released at once");
}

#[test]
fn b13_leftovers_are_held_until_gone_or_killed() {
    let mut rules = shim_rules(GRACE);
    rules.deadline = Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_020));
    let mut sim = Sim::new(rules);
    sim.feed(Event::Exited(0));
    sim.feed(Event::OutputEnded { eof: true });
    assert_eq!(sim.finishes().len(), 1);
    assert!(!sim.m.released(), "leftovers live");
    sim.sleep(Duration::from_secs(60));
    assert_eq!(
        sim.now.wall,
        rules.deadline.unwrap_or(sim.now.wall) - Duration::from_secs(15)
    );
    // The time limit reaches the leftovers of a finished session.
    while sim.count(&Action::Terminate { first: true }) == 0 {
        sim.sleep(Duration::from_secs(60));
    }
    sim.obeys_term = true;
    while !sim.m.released() {
        sim.sleep(Duration::from_secs(60));
    }
    assert_eq!(sim.count(&Action::Release), 1);
    assert_eq!(sim.finishes().len(), 1, "finished once");
}

/// One step of a generated session.
#[derive(Debug, Clone)]
enum Step {
    Output,
    Eof,
    Broken,
    Exit(i32),
    Kill(u8),
    Wait(u16),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Output),
        1 => Just(Step::Eof),
        1 => Just(Step::Broken),
        2 => (0i32..4).prop_map(Step::Exit),
        1 => (0u8..3).prop_map(Step::Kill),
        3 => (0u16..3000).prop_map(Step::Wait),
    ]
}

const SOURCES: [KillSource; 3] = [
    KillSource::ProcessKill,
    KillSource::OperatorStop,
    KillSource::TimeLimit,
];

/// Runs `steps`, then lets time pass until the session is released.
fn run(mut sim: Sim, steps: &[Step]) -> Sim {
    for s in steps {
        match s {
            Step::Output if sim.m.reading() => sim.feed(Event::Output),
            Step::Eof if sim.m.reading() => sim.feed(Event::OutputEnded { eof: true }),
            Step::Broken if sim.m.reading() => sim.feed(Event::OutputEnded { eof: false }),
            Step::Exit(code) => sim.feed(Event::Exited(*code)),
            Step::Kill(i) => sim.feed(Event::Kill(Some(SOURCES[usize::from(*i)]))),
            Step::Wait(ms) => {
                let end = sim.now.at + Duration::from_millis(u64::from(*ms));
                while sim.now.at < end {
                    sim.sleep(end - sim.now.at);
                }
            }
            _ => {}
        }
    }
    sim.feed(Event::Exited(99));
    for _ in 0..10_000 {
        if sim.m.released() || (sim.m.finished() && sim.m.rules.kill.is_none()) {
            break;
        }
        // The tree empties eventually (it was killed, or its leftovers exit).
        if sim.now.at > sim.log.first().map_or(sim.now.at, |(t, _)| *t) + LINGER * 4 {
            sim.tree_alive = false;
        }
        sim.sleep(Duration::from_secs(60));
    }
    sim
}

fn check(sim: &Sim, steps: &[Step]) {
    let finishes = sim.finishes();
    assert_eq!(finishes.len(), 1, "finished exactly once: {:?}", sim.log);
    let first_exit = steps.iter().find_map(|s| match s {
        Step::Exit(code) => Some(*code),
        _ => None,
    });
    assert_eq!(
        finishes[0].0,
        Some(first_exit.unwrap_or(99)),
        "the first exit wins"
    );
    // A kill carried out before the finish is reported with its source (every
    // generated kill has one); the reader reports none.
    let finish_index = sim
        .log
        .iter()
        .position(|(_, a)| matches!(a, Action::Finish { .. }));
    let killed_before = sim.log[..finish_index.unwrap_or(0)]
        .iter()
        .any(|(_, a)| *a == Action::Terminate { first: true });
    if sim.m.rules.kill.is_none() {
        assert_eq!(finishes[0].1, None);
    } else {
        assert_eq!(finishes[0].1.is_some(), killed_before, "{:?}", sim.log);
    }
    // SIGKILL never comes before the grace is over.
    if let (Some(term), Some(kill)) = (
        sim.log
            .iter()
            .find(|(_, a)| *a == Action::Terminate { first: true }),
        sim.log
            .iter()
            .find(|(_, a)| *a == Action::Escalate { first: true }),
    ) {
        assert!(
            kill.0 >= term.0 + GRACE,
            "escalated before the grace ran out"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn any_order_finishes_once_with_the_first_exit_shim(steps in prop::collection::vec(step(), 0..24)) {
        let sim = run(Sim::shim(), &steps);
        check(&sim, &steps);
        prop_assert!(sim.m.released());
    }

    #[test]
    fn any_order_finishes_once_with_the_first_exit_reader(steps in prop::collection::vec(step(), 0..24)) {
        let sim = run(Sim::reader(), &steps);
        check(&sim, &steps);
    }

    /// Exit then end-of-file and end-of-file then exit end the session the same way.
    #[test]
    fn exit_and_eof_commute(code in 0i32..255, gap in 0u64..999, exit_first: bool) {
        let mut sim = Sim::shim();
        sim.tree_alive = false;
        let (a, b) = if exit_first {
            (Event::Exited(code), Event::OutputEnded { eof: true })
        } else {
            (Event::OutputEnded { eof: true }, Event::Exited(code))
        };
        sim.feed(a);
        sim.advance(Duration::from_millis(gap));
        sim.feed(b);
        let finished_at = sim.log.iter().find(|(_, a)| matches!(a, Action::Finish { .. })).map(|(t, _)| *t);
        prop_assert_eq!(finished_at, Some(sim.now.at), "finished at the second of the two");
        prop_assert_eq!(sim.finishes(), vec![(Some(code), None, true)]);
    }

    /// A kill requested at any point of the grace of another keeps one course.
    #[test]
    fn kill_during_grace_keeps_one_course(at in 0u64..4000) {
        let mut sim = Sim::shim();
        sim.feed(Event::Kill(Some(KillSource::TurnTimeout)));
        let start = sim.now.at;
        while sim.now.at < start + Duration::from_millis(at) {
            let left = start + Duration::from_millis(at) - sim.now.at;
            sim.sleep(left);
        }
        sim.feed(Event::Kill(Some(KillSource::HostShutdown)));
        sim.feed(Event::Exited(-9));
        for _ in 0..1000 {
            if sim.m.finished() { break; }
            sim.sleep(Duration::from_secs(10));
        }
        prop_assert_eq!(sim.count(&Action::Terminate { first: true }), 1);
        let escalations = sim.count(&Action::Escalate { first: true });
        prop_assert!(escalations <= 1);
        prop_assert_eq!(sim.finishes()[0].1, Some(KillSource::TurnTimeout));
    }
}

#[test]
fn b15_the_grace_runs_from_the_first_look_after_sigterm() {
    let t0 = Instant::now();
    let mut actions: Vec<Action<()>> = Vec::new();
    let mut course = KillCourse::start(t0, GRACE, ZeroGrace::Escalate, RECHECK, &mut actions);
    assert_eq!(actions, vec![Action::Terminate { first: true }]);
    // Sending SIGTERM to a large tree took 500 ms: the grace starts after it.
    let t1 = t0 + Duration::from_millis(500);
    assert!(course.due(t1));
    course.looked(t1, false, &mut actions);
    course.looked(t0 + GRACE, false, &mut actions);
    assert!(!actions.contains(&Action::Escalate { first: true }));
    course.looked(t1 + GRACE, false, &mut actions);
    assert!(actions.contains(&Action::Escalate { first: true }));
    assert_eq!(course.next_look(), Some(t1 + GRACE + RECHECK));
    course.looked(t1 + GRACE + RECHECK, true, &mut actions);
    assert!(!course.under_way());
    assert_eq!(course.next_look(), None);
}

#[test]
fn b15_a_zero_grace_of_the_tree_kill_is_sigterm_only() {
    let t0 = Instant::now();
    let mut actions: Vec<Action<()>> = Vec::new();
    let mut course = KillCourse::start(
        t0,
        Duration::ZERO,
        ZeroGrace::TermOnly,
        RECHECK,
        &mut actions,
    );
    let mut at = t0;
    while course.under_way() {
        course.looked(at, false, &mut actions);
        at += RECHECK;
    }
    assert!(!actions.iter().any(|a| matches!(a, Action::Escalate { .. })));
    assert!(
        actions.contains(&Action::Terminate { first: false }),
        "newcomers get SIGTERM"
    );
    assert_eq!(actions.last(), Some(&Action::Survivors));
    assert!(at >= t0 + SURVIVOR_PROBE);
}
