//! The B33 table: one `#[test]` per command line, so a failure names the command.

use crate::{check_allow, check_block};

macro_rules! block {
    ($($name:ident: $command:expr;)*) => {$(
        #[test]
        fn $name() {
            check_block($command);
        }
    )*};
}

macro_rules! allow {
    ($($name:ident: $command:expr;)*) => {$(
        #[test]
        fn $name() {
            check_allow($command);
        }
    )*};
}

block! {
    b33_block_pkill_9_python3: "pkill -9 python3";
    b33_block_killall_python: "killall python";
    b33_block_taskkill_im_python_exe: "taskkill /F /IM python.exe";
    b33_block_stop_process_name_python: "Stop-Process -Name python";
    b33_block_taskkill_fi_imagename: "taskkill /FI \"IMAGENAME eq python.exe\"";
    b33_block_pgrep_python_xargs_kill: "pgrep python | xargs kill";
    b33_block_kill_dollar_pgrep: "kill $(pgrep python)";
    b33_block_herd_shutdown: "herd shutdown";
    b33_block_systemctl_user_restart_herd: "systemctl --user restart herd";
    b33_block_pkill_f_host_cmdline: "pkill -f 'python -m agent.main'";
    b33_block_pkill_f_agent: "pkill -f agent";
    b33_block_kill_9_minus_1: "kill -9 -1";
}

allow! {
    b33_allow_pkill_f_other_script: "pkill -f 'python my_script.py'";
    b33_allow_pkill_f_node_dev_server: "pkill -f 'node dev-server'";
    b33_allow_taskkill_agent_browser: "taskkill /F /IM agent-browser.exe";
    b33_allow_kill_numeric_pid: "kill 12345";
    b33_allow_kill_9_pid_var: "kill -9 $PID";
    b33_allow_grep_pkill_in_notes: "grep 'pkill python' notes.txt";
    b33_allow_echo_killall: "echo \"killall python\"";
    b33_allow_herd_serve: "herd serve";
    b33_allow_systemctl_start_herd: "systemctl start herd";
    b33_allow_prose_restart_gateway: "please restart the payment gateway";
}
