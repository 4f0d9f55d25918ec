//! The B33 table: one `#[test]` per command line, so a failure names the command.
//!
//! The host is [`crate::host`]: a `python -m agent.main --serve` agent supervised by herd,
//! with the units `herd.service`, `ai.herd.daemon` and `agent-gateway`. The spellings are
//! the kill commands agents type in practice, plain and disguised.

use herd_guards::Rule;

use crate::{check_allow, check_block};

/// One must-block row per test; the optional rule is asserted too.
macro_rules! block {
    ($($name:ident: $command:expr $(=> $rule:ident)?;)*) => {$(
        #[test]
        fn $name() {
            let _rule = check_block($command);
            $(assert_eq!(_rule, Rule::$rule, "rule for {:?}", $command);)?
        }
    )*};
}

/// One must-allow row per test.
macro_rules! allow {
    ($($name:ident: $command:expr;)*) => {$(
        #[test]
        fn $name() {
            check_allow($command);
        }
    )*};
}

// Name-based killers aimed at a host image.
block! {
    b33_block_pkill_9_python3: "pkill -9 python3" => KillByName;
    b33_block_pkill_python: "pkill python" => KillByName;
    b33_block_pkill_kill_signal_name: "pkill -KILL python";
    b33_block_pkill_signal_eq: "pkill --signal=KILL python3";
    b33_block_pkill_signal_space: "pkill --signal KILL python";
    b33_block_pkill_sigkill_exact_version: "pkill -SIGKILL -x python3.12";
    b33_block_pkill_exact: "pkill -x python";
    b33_block_pkill_echo: "pkill -e python";
    b33_block_pkill_user_and_name: "pkill -u \"$USER\" python";
    b33_block_pkill_ignore_case: "pkill -i PYTHON";
    b33_block_pkill_substring: "pkill pyth";
    b33_block_pkill_anchored_regex: "pkill '^py'";
    b33_block_pkill_herd: "pkill herd";
    b33_block_pkill_9_herd: "pkill -9 herd";
    b33_block_pkill_exact_herd: "pkill -x herd";
    b33_block_pkill_absolute_path: "/usr/bin/pkill python";
    b33_block_pkill_backslash_alias_bypass: "\\pkill python";
    b33_block_pkill_quote_splice_double: "p\"kill\" python";
    b33_block_pkill_quote_splice_single: "pk'ill' python";
    b33_block_pkill_uppercase_tool: "PKILL python3";
    b33_block_pkill_option_value_before_name: "pkill -9 -u root python";
    b33_block_pkill_pidfile: "pkill -F ~/.herd/herd.pid";
    b33_block_skill_python: "skill -KILL python";
    b33_block_killall_python: "killall python" => KillByName;
    b33_block_killall_9_python3: "killall -9 python3";
    b33_block_killall_kill_version: "killall -KILL python3.12";
    b33_block_killall_s_kill: "killall -s KILL python";
    b33_block_killall_signal_eq_pythonw: "killall --signal=KILL pythonw";
    b33_block_killall_exact: "killall -e python3";
    b33_block_killall_ignore_case: "killall -I PYTHON";
    b33_block_killall_regex: "killall -r 'pyth.*'";
    b33_block_killall_macos_regex: "killall -m 'pyth.*'";
    b33_block_killall_path: "killall /usr/bin/python3";
    b33_block_killall_herd: "killall herd";
    b33_block_killall_wait_herd: "killall -w herd";
    b33_block_killall_mixed_names: "killall -9 node python3";
    b33_block_killall_macos_capitalised: "killall Python";
}

// `pkill -f` patterns judged against the host's command line.
block! {
    b33_block_pkill_f_host_cmdline: "pkill -f 'python -m agent.main'" => KillByCmdline;
    b33_block_pkill_f_agent: "pkill -f agent" => KillByCmdline;
    b33_block_pkill_f_escaped_dot: "pkill -f 'agent\\.main'";
    b33_block_pkill_f_regex: "pkill -f \"python.*agent\"";
    b33_block_pkill_9_f: "pkill -9 -f agent.main";
    b33_block_pkill_full_long: "pkill --full 'serve'";
    b33_block_pgrep_f_xargs_kill: "pgrep -f \"python -m agent\" | xargs kill -9" => KillHostPids;
}

// Kills of everything the user owns, and of the parent.
block! {
    b33_block_kill_9_minus_1: "kill -9 -1" => KillEveryone;
    b33_block_kill_dashdash_minus_1: "kill -- -1" => KillEveryone;
    b33_block_kill_kill_minus_1: "kill -KILL -1";
    b33_block_kill_s_kill_minus_1: "kill -s KILL -1";
    b33_block_pkill_user_only: "pkill -u \"$USER\"" => KillEveryone;
    b33_block_pkill_uid_only: "pkill -U 1000";
    b33_block_pkill_inverse: "pkill -v node" => KillEveryone;
    b33_block_killall_u_root: "killall -u root" => KillEveryone;
    b33_block_killall_u_user: "killall -u \"$USER\"";
    b33_block_killall5: "killall5 -9" => KillEveryone;
    b33_block_loginctl_terminate_user: "loginctl terminate-user \"$USER\"";
    b33_block_kill_ppid: "kill -9 $PPID" => KillParent;
    b33_block_kill_ppid_braces: "kill ${PPID}";
    b33_block_kill_ppid_quoted: "kill -TERM \"$PPID\"";
}

// `kill` fed with the host's PIDs.
block! {
    b33_block_kill_dollar_pgrep: "kill $(pgrep python)" => KillHostPids;
    b33_block_kill_9_pgrep_f: "kill -9 $(pgrep -f agent.main)";
    b33_block_kill_backtick_pidof: "kill `pidof python3`";
    b33_block_kill_backtick_pgrep_herd: "kill -9 `pgrep herd`";
    b33_block_pgrep_python_xargs_kill: "pgrep python | xargs kill" => KillHostPids;
    b33_block_pgrep_xargs_r_kill: "pgrep -f agent | xargs -r kill -9";
    b33_block_pidof_xargs_kill_9: "pidof python | xargs kill -9";
    b33_block_pidof_herd_xargs_kill: "pidof herd | xargs kill";
    b33_block_ps_grep_awk_xargs: "ps aux | grep python | awk '{print $2}' | xargs kill -9";
    b33_block_ps_grep_v_grep: "ps aux | grep -v grep | grep agent.main | awk '{print $2}' | xargs kill";
    b33_block_ps_awk_regex: "ps -ef | awk '/python/ {print $2}' | xargs kill";
    b33_block_kill_ps_bracket_trick: "kill -9 $(ps aux | grep '[p]ython' | awk '{print $2}')";
    b33_block_for_pgrep_kill: "for p in $(pgrep python); do kill -9 $p; done";
    b33_block_var_from_pgrep: "PIDS=$(pgrep python); kill $PIDS";
    b33_block_var_from_pidof_and: "pid=$(pidof herd) && kill -TERM \"$pid\"";
    b33_block_kill_host_pidfile: "kill $(cat ~/.herd/herd.pid)";
    b33_block_kill_systemd_main_pid: "kill -9 $(systemctl show -p MainPID --value herd)";
    b33_block_while_read_kill: "while read p; do kill $p; done < <(pgrep python)";
    b33_block_sudo_kill_pgrep: "sudo kill -9 $(pgrep python)";
    b33_block_bash_c_kill_pgrep: "bash -c 'kill -9 $(pgrep -f agent.main)'";
    b33_block_kill_bash_read_pidfile: "kill $(<~/.herd/herd.pid)";
    b33_block_kill_head_pidfile: "kill $(head -1 herd.pid)";
    b33_block_kill_lsof_binary: "kill -9 $(lsof -t /usr/bin/python3)";
    b33_block_kill_pgrep_oldest: "kill -9 \"$(pgrep -o python)\"";
    b33_block_pgrep_head_xargs: "pgrep python | head -1 | xargs kill";
    b33_block_kill_ps_ppid: "kill -TERM $(ps -o ppid= -p $$)";
    b33_block_kill_awk_exact_name: "kill -9 $(ps -eo pid,comm | awk '$2==\"python3\"{print $1}')";
    b33_block_xargs_kill_from_pidfile: "xargs kill < herd.pid";
    b33_block_cat_pidfile_xargs_kill: "cat herd.pid | xargs kill -9";
}

// Windows and PowerShell spellings.
block! {
    b33_block_taskkill_im_python_exe: "taskkill /F /IM python.exe" => KillByName;
    b33_block_taskkill_im_tree: "taskkill /IM python.exe /T /F";
    b33_block_taskkill_pythonw: "taskkill /im pythonw.exe";
    b33_block_taskkill_dash_flags: "taskkill -F -IM python3.exe";
    b33_block_taskkill_wildcard: "taskkill /F /IM python*";
    b33_block_taskkill_fi_imagename: "taskkill /FI \"IMAGENAME eq python.exe\"";
    b33_block_taskkill_fi_wildcard: "taskkill /F /FI \"IMAGENAME eq python*\"";
    b33_block_taskkill_fi_ne: "taskkill /FI \"IMAGENAME ne explorer.exe\"" => KillEveryone;
    b33_block_taskkill_fi_username: "taskkill /F /FI \"USERNAME eq alice\"";
    b33_block_taskkill_uppercase: "TASKKILL /F /IM PYTHON.EXE";
    b33_block_taskkill_exe_herd: "taskkill.exe /F /IM herd.exe";
    b33_block_stop_process_name_python: "Stop-Process -Name python" => KillByName;
    b33_block_stop_process_force: "Stop-Process -Name python -Force";
    b33_block_stop_process_list: "Stop-Process -Name node,python";
    b33_block_stop_process_processname: "Stop-Process -ProcessName python3";
    b33_block_stop_process_wildcard: "Stop-Process -Name 'py*'";
    b33_block_spps_abbreviated: "spps -n python";
    b33_block_get_process_pipe_stop: "Get-Process python | Stop-Process";
    b33_block_get_process_wildcard_pipe: "Get-Process -Name python* | Stop-Process -Force";
    b33_block_gps_pipe_kill: "gps python | kill";
    b33_block_get_process_all_pipe_stop: "Get-Process | Stop-Process" => KillEveryone;
    b33_block_get_process_where_pipe: "Get-Process | Where-Object { $_.Name -like 'python*' } | Stop-Process";
    b33_block_powershell_command: "powershell -Command \"Stop-Process -Name python -Force\"";
    b33_block_pwsh_c_pipeline: "pwsh -c 'Get-Process python | Stop-Process'";
    b33_block_powershell_encoded: "powershell -NoProfile -EncodedCommand UwB0AG8AcAAtAFAAcgBvAGMAZQBzAHMAIAAtAE4AYQBtAGUAIABwAHkAdABoAG8AbgAgAC0ARgBvAHIAYwBlAA==";
    b33_block_cmd_c_taskkill: "cmd /c \"taskkill /F /IM python.exe\"";
    b33_block_wmic_delete: "wmic process where name='python.exe' delete";
}

// The host's lifecycle, its service units, and the machine.
block! {
    b33_block_herd_shutdown: "herd shutdown" => HostLifecycle;
    b33_block_herd_daemon_stop: "herd daemon stop" => HostLifecycle;
    b33_block_herd_daemon_restart: "herd daemon restart";
    b33_block_herd_flag_value_daemon_stop: "herd --home /srv/herd daemon stop";
    b33_block_herd_absolute_path: "/usr/local/bin/herd shutdown";
    b33_block_herd_exe: "herd.exe daemon restart";
    b33_block_herd_quote_splice: "herd daemon re\"start\"";
    b33_block_herd_uppercase: "HERD SHUTDOWN";
    b33_block_systemctl_user_restart_herd: "systemctl --user restart herd" => ServiceStop;
    b33_block_systemctl_restart_service: "systemctl restart herd.service";
    b33_block_systemctl_user_stop: "systemctl --user stop herd";
    b33_block_systemctl_kill: "systemctl kill herd";
    b33_block_systemctl_kill_signal: "systemctl --user kill -s KILL herd.service";
    b33_block_systemctl_try_restart: "systemctl try-restart herd";
    b33_block_systemctl_disable_now: "systemctl --user disable --now herd";
    b33_block_systemctl_quote_splice: "systemctl re\"start\" herd";
    b33_block_sudo_systemctl_stop: "sudo systemctl stop herd.service";
    b33_block_systemctl_glob: "systemctl --user restart 'herd*'";
    b33_block_systemctl_gateway_unit: "systemctl stop agent-gateway";
    b33_block_systemctl_no_block: "systemctl --no-block --user restart herd.service";
    b33_block_service_restart: "service herd restart";
    b33_block_service_stop: "service herd stop";
    b33_block_init_d_stop: "/etc/init.d/herd stop";
    b33_block_rc_service: "rc-service herd restart";
    b33_block_sv_restart: "sv restart herd";
    b33_block_supervisorctl_restart: "supervisorctl restart herd";
    b33_block_sc_stop: "sc stop herd";
    b33_block_net_stop: "net stop herd";
    b33_block_stop_service: "Stop-Service herd";
    b33_block_launchctl_bootout: "launchctl bootout gui/501/ai.herd.daemon" => ServiceStop;
    b33_block_launchctl_kickstart_k: "launchctl kickstart -k gui/501/ai.herd.daemon";
    b33_block_launchctl_splice_double: "launchctl kick\"start\" -k gui/501/ai.herd.daemon";
    b33_block_launchctl_splice_single: "launchctl kick'start' -k gui/501/ai.herd.daemon";
    b33_block_launchctl_splice_backslash: "launchctl kick\\start -k gui/501/ai.herd.daemon";
    b33_block_launchctl_bootout_splice: "launchctl boot\"out\" gui/501/ai.herd.daemon";
    b33_block_launchctl_disable_backslash: "launchctl dis\\able gui/501/ai.herd.daemon";
    b33_block_launchctl_label_splice: "launchctl bootout gui/501/ai.herd.\"daemon\"";
    b33_block_launchctl_stop: "launchctl stop ai.herd.daemon";
    b33_block_launchctl_remove: "launchctl remove ai.herd.daemon";
    b33_block_launchctl_unload_plist: "launchctl unload ~/Library/LaunchAgents/ai.herd.daemon.plist";
    b33_block_launchctl_unload_w: "launchctl unload -w ~/Library/LaunchAgents/ai.herd.daemon.plist";
    b33_block_launchctl_loop: "uid=$(id -u); for item in 'ai.herd.daemon:/a.plist' 'ai.other:/b.plist'; do label=${item%%:*}; launchctl bootout \"gui/$uid/$label\"; done";
    b33_block_sudo_reboot: "sudo reboot" => MachineShutdown;
    b33_block_shutdown_now: "shutdown -h now";
    b33_block_shutdown_restart: "shutdown -r +1";
    b33_block_systemctl_poweroff: "systemctl poweroff";
    b33_block_sudo_systemctl_reboot: "sudo systemctl reboot";
    b33_block_init_6: "init 6";
    b33_block_windows_shutdown: "shutdown /s /t 0";
    b33_block_restart_computer: "Restart-Computer -Force";
}

// Disguises: separators, substitutions, wrappers, nested shells, heredocs, code.
block! {
    b33_block_after_semicolon: "true; pkill python";
    b33_block_after_and: "echo start && killall python";
    b33_block_after_or: "false || pkill -9 python3";
    b33_block_pipeline_stage: "ls | pkill python";
    b33_block_no_space_semicolon: "true;herd shutdown";
    b33_block_newline: "echo one\npkill python";
    b33_block_dollar_paren: "echo $(pkill python)";
    b33_block_backticks: "echo `killall python`";
    b33_block_subshell: "(pkill python)";
    b33_block_group: "{ pkill python; }";
    b33_block_if_body: "if true; then pkill python; fi";
    b33_block_for_body: "for i in 1 2; do pkill python; done";
    b33_block_while_body: "while true; do herd daemon restart; done";
    b33_block_case_body: "case x in x) pkill python;; esac";
    b33_block_function_body: "f() { pkill python; }; f";
    b33_block_background: "pkill python &";
    b33_block_line_continuation: "pkill \\\n  -9 \\\n  python3";
    b33_block_sh_c: "sh -c 'pkill python'";
    b33_block_bash_c_double: "bash -c \"killall -9 python3\"";
    b33_block_bash_lc: "bash -lc 'herd shutdown'";
    b33_block_nested_sh_c: "sh -c \"sh -c 'pkill python'\"";
    b33_block_zsh_c: "zsh -c 'launchctl kick\"start\" -k gui/501/ai.herd.daemon'";
    b33_block_sudo: "sudo pkill python";
    b33_block_sudo_options: "sudo -u root -E pkill -9 python";
    b33_block_sudo_dashdash: "sudo -- pkill python";
    b33_block_sudo_sh_c: "sudo sh -c 'pkill -9 python'";
    b33_block_doas: "doas pkill python";
    b33_block_env: "env pkill python";
    b33_block_env_assignments: "env -i PATH=/usr/bin pkill python";
    b33_block_env_split_string: "env -S 'pkill python'";
    b33_block_assignment_prefix: "LANG=C pkill python";
    b33_block_nohup: "nohup pkill python &";
    b33_block_timeout: "timeout 5 pkill python";
    b33_block_timeout_options: "timeout -s KILL 10s killall python";
    b33_block_nice_n: "nice -n 10 pkill python";
    b33_block_nice_dash_number: "nice -10 pkill python";
    b33_block_exec: "exec pkill python";
    b33_block_command_builtin: "command pkill python";
    b33_block_time: "time pkill python";
    b33_block_setsid: "setsid pkill python";
    b33_block_stdbuf: "stdbuf -oL pkill python";
    b33_block_watch: "watch -n 5 'pkill python'";
    b33_block_su_c: "su -c 'pkill python'";
    b33_block_su_user_c: "su root -c \"killall python\"";
    b33_block_eval: "eval \"pkill python\"";
    b33_block_eval_kill_pgrep: "eval 'kill $(pgrep python)'";
    b33_block_find_exec: "find /tmp -name x -exec pkill python \\;";
    b33_block_xargs_pkill: "echo x | xargs pkill python";
    b33_block_variable_name: "p=python; pkill $p";
    b33_block_variable_concat: "P=pyt; pkill \"${P}hon\"";
    b33_block_for_variable: "for n in node python; do killall $n; done";
    b33_block_echo_pipe_sh: "echo 'pkill python' | sh";
    b33_block_printf_pipe_bash: "printf 'pkill python\\n' | bash";
    b33_block_grep_pipe_sh: "grep 'systemctl restart herd' cmds.txt | sh";
    b33_block_herestring_bash: "bash <<< \"pkill python\"";
    b33_block_heredoc_bash: "bash <<EOF\npkill python\nEOF";
    b33_block_heredoc_quoted_bash: "bash <<'EOF'\nherd shutdown\nEOF";
    b33_block_heredoc_cat_pipe_bash: "cat <<'EOF' | bash\nkillall python\nEOF";
    b33_block_heredoc_unquoted_to_file: "cat > /tmp/x <<EOF\nherd shutdown\nEOF";
    b33_block_heredoc_written_then_run: "cat > run.sh <<'EOF'\npkill python\nEOF\nbash run.sh";
    b33_block_python_c_os_system: "python -c \"import os; os.system('pkill python')\"";
    b33_block_python_argv_list: "python3 -c 'import subprocess; subprocess.run([\"pkill\", \"-9\", \"python3\"])'";
    b33_block_node_exec_sync: "node -e \"require('child_process').execSync('killall python')\"";
    b33_block_python_kill_parent: "python -c \"import os, signal; os.kill(os.getppid(), signal.SIGTERM)\"" => KillParent;
    b33_block_osascript: "osascript -e 'do shell script \"pkill python\"'";
    b33_block_perl_system: "perl -e 'system(\"pkill python\")'";
    b33_block_nul_in_verb: "pk\0ill python";
    b33_block_nul_in_systemctl_verb: "systemctl re\0start herd";
    b33_block_unbalanced_quote_with_verb: "echo \"unbalanced\nherd shutdown" => Unparseable;
    b33_block_unbalanced_single_quote_pkill: "echo 'oops\npkill python";
    b33_block_python_argv_as_shell: "subprocess.run([\"herd\", \"shutdown\"])";
    b33_block_crlf_line_ends: "echo hi\r\npkill python\r\n";
    b33_block_echo_spliced_name: "$(echo pkill) python";
    b33_block_eval_echo_output: "eval $(echo pkill python)";
    b33_block_sh_c_echo_output: "sh -c \"$(echo pkill python)\"";
    b33_block_echo_spliced_pattern: "pkill -f \"$(echo python)\"";
    b33_block_variable_spliced_name: "k=kill; p${k} python";
    b33_block_busybox_applet: "busybox pkill python";
    b33_block_sudo_login_shell: "sudo -i pkill python";
    b33_block_env_dashdash: "env -- pkill python";
    b33_block_quoted_tool_name: "'killall' python3";
    b33_block_python_stdin_heredoc: "python - <<'EOF'\nimport os\nos.system(\"pkill -9 python\")\nEOF";
    b33_block_pkill_or_true: "pkill -f \"python -m agent.main\" || true";
    b33_block_echo_names_into_xargs_pkill: "echo python | xargs pkill -9";
    b33_block_shell_variable_c: "\"$SHELL\" -c 'pkill python'";
    b33_block_python_popen_pgrep_kill: "python3 -c \"import os; [os.kill(int(p), 9) for p in os.popen('pgrep python').read().split()]\"";
    b33_block_psutil_kill_loop: "python -c \"import psutil; [p.kill() for p in psutil.process_iter() if p.name() == 'python3']\"";
    b33_block_perl_kill_getppid: "perl -e 'kill 9, getppid'" => KillParent;
    b33_block_trap_action: "trap 'pkill python' EXIT; npm run dev";
    b33_block_node_kill_ppid: "node -e 'process.kill(process.ppid, \"SIGTERM\")'" => KillParent;
}

// Other images, numeric PIDs, data, prose, and starting the host.
allow! {
    b33_allow_pkill_f_other_script: "pkill -f 'python my_script.py'";
    b33_allow_pkill_f_node_dev_server: "pkill -f 'node dev-server'";
    b33_allow_pkill_node: "pkill node";
    b33_allow_pkill_9_node: "pkill -9 node";
    b33_allow_killall_node: "killall node";
    b33_allow_killall_9_chrome: "killall -9 chrome";
    b33_allow_pkill_user_value_is_not_target: "pkill -u python node";
    b33_allow_killall_user_value_is_not_target: "killall -u python node";
    b33_allow_pkill_f_uvicorn: "pkill -f \"uvicorn main:app\"";
    b33_allow_pkill_f_vite: "pkill -f 'vite --port 5173'";
    b33_allow_pkill_children_of_pid: "pkill -P 4242";
    b33_allow_taskkill_agent_browser: "taskkill /F /IM agent-browser.exe";
    b33_allow_taskkill_pid: "taskkill /PID 1234 /F";
    b33_allow_taskkill_node: "taskkill /F /IM node.exe";
    b33_allow_taskkill_window_title: "taskkill /FI \"WINDOWTITLE eq Untitled*\"";
    b33_allow_stop_process_id: "Stop-Process -Id 1234";
    b33_allow_stop_process_node: "Stop-Process -Name node";
    b33_allow_stop_process_chrome_force: "Stop-Process -Name chrome -Force";
    b33_allow_get_process_node_stop: "Get-Process node | Stop-Process";
    b33_allow_kill_numeric_pid: "kill 12345";
    b33_allow_kill_9_numeric: "kill -9 12345";
    b33_allow_kill_9_pid_var: "kill -9 $PID";
    b33_allow_kill_process_group: "kill -TERM -12345";
    b33_allow_kill_job: "kill %1";
    b33_allow_kill_list: "kill -l";
    b33_allow_kill_zero_probe: "kill -0 12345";
    b33_allow_kill_s_term: "kill -s TERM 4242";
    b33_allow_kill_lsof_port: "kill $(lsof -t -i :8000)";
    b33_allow_lsof_xargs_kill: "lsof -ti :3000 | xargs kill -9";
    b33_allow_kill_own_pidfile: "kill $(cat server.pid)";
    b33_allow_sleep_kill_job: "sleep 1 && kill %1";
    b33_allow_pgrep_listing: "pgrep python";
    b33_allow_pgrep_f_listing: "pgrep -f agent.main";
    b33_allow_pidof_listing: "pidof python";
    b33_allow_ps_grep_listing: "ps aux | grep python";
    b33_allow_grep_pkill_in_notes: "grep 'pkill python' notes.txt";
    b33_allow_echo_killall: "echo \"killall python\"";
    b33_allow_echo_herd_shutdown: "echo 'herd shutdown'";
    b33_allow_echo_kill_minus_1: "echo \"kill -9 -1 would be bad\"";
    b33_allow_rg_systemctl_logs: "rg 'systemctl restart herd' logs/";
    b33_allow_grep_count_syslog: "grep -c 'systemctl restart herd' /var/log/syslog";
    b33_allow_grep_recursive_kill: "grep -r \"kill -9\" src/";
    b33_allow_rg_taskkill_docs: "rg -n 'taskkill /IM python.exe' docs/";
    b33_allow_journalctl_grep: "journalctl -u herd --grep 'systemctl restart herd'";
    b33_allow_sqlite_like: "sqlite3 db \"SELECT msg FROM log WHERE msg LIKE '%pkill python%'\"";
    b33_allow_psql_select: "psql -c \"SELECT * FROM events WHERE cmd = 'systemctl stop herd'\"";
    b33_allow_cat_pipe_grep: "cat notes.txt | grep pkill";
    b33_allow_quoted_heredoc_to_file: "cat > runbook.md <<'EOF'\nIf the box is wedged, a human can run: herd shutdown\nEOF";
    b33_allow_printf_prose: "printf '%s\\n' 'launchctl submit is persistent'";
    b33_allow_array_of_paths: "FILES=(\n  \"/tmp/notes about procedures.txt\"\n)\necho \"${FILES[@]}\"";
    b33_allow_prose_restart_gateway: "please restart the payment gateway";
    b33_allow_prose_restart_server: "restart the server application";
    b33_allow_prose_two_lines: "this restarts the payment gateway\nunrelated herd note on the next line";
    b33_allow_prose_after_restart: "echo after the herd daemon restarted cleanly";
    b33_allow_cat_path_with_words: "cat '/docs/herd shutdown notes.md'";
    b33_allow_less_path_with_words: "less \"/home/user/notes/herd daemon restart runbook.txt\"";
    b33_allow_herd_serve: "herd serve";
    b33_allow_herd_kill_session: "herd kill proc_0123456789ab";
    b33_allow_herd_list: "herd list";
    b33_allow_herd_logs: "herd logs proc_0123456789ab";
    b33_allow_herd_daemon_status: "herd daemon status";
    b33_allow_systemctl_start_herd: "systemctl start herd";
    b33_allow_systemctl_status_herd: "systemctl status herd";
    b33_allow_systemctl_user_status: "systemctl --user status herd.service";
    b33_allow_systemctl_restart_nginx: "systemctl restart nginx";
    b33_allow_systemctl_sibling_unit: "systemctl restart herd-meta.service";
    b33_allow_sudo_restart_postgres: "sudo systemctl restart postgresql";
    b33_allow_systemctl_remote_host: "systemctl -H build-box restart herd";
    b33_allow_systemctl_user_pipewire: "systemctl --user restart pipewire";
    b33_allow_launchctl_other_label: "launchctl unload ai.other.updater.plist";
    b33_allow_launchctl_splice_other_label: "launchctl kick\"start\" -k gui/501/ai.other.updater";
    b33_allow_launchctl_list: "launchctl list";
    b33_allow_service_nginx_restart: "service nginx restart";
    b33_allow_service_herd_status: "service herd status";
    b33_allow_shutdown_cancel: "shutdown -c";
    b33_allow_npm_run_dev: "npm run dev";
    b33_allow_python_script: "python my_script.py";
    b33_allow_python_pytest: "python -m pytest -x";
    b33_allow_python_c_print: "python -c \"print('checking gateway restart docs')\"";
    b33_allow_python_c_print_one: "/usr/bin/python3 -c \"print(1)\"";
    b33_allow_node_server: "node server.js";
    b33_allow_cargo_test: "cargo test -p herd-guards";
    b33_allow_git_commit_message: "git commit -m \"fix: pkill handling\"";
    b33_allow_git_log_grep: "git log --grep 'killall'";
    b33_allow_make_stop: "make stop";
    b33_allow_man_pkill: "man pkill";
    b33_allow_which_killall: "which killall";
    b33_allow_command_v_pkill: "command -v pkill";
    b33_allow_timeout_npm: "timeout 10 npm test";
    b33_allow_apt_install_python: "sudo apt-get install -y python3";
    b33_allow_bash_missing_script: "bash /nonexistent/deeply/missing.sh";
    b33_allow_bash_build_script: "bash ./build.sh";
    b33_allow_unbalanced_without_verb: "echo \"unbalanced";
    b33_allow_unterminated_single_quote: "echo 'it is fine";
    b33_allow_tail_herd_log: "tail -f /var/log/herd.log";
    b33_allow_curl_shutdown_endpoint: "curl -X POST http://localhost:8080/shutdown";
    b33_allow_echo_ppid: "echo $PPID";
    b33_allow_ps_ppid: "ps -o ppid= -p $$";
    b33_allow_docker_restart: "docker restart web";
    b33_allow_ls_proc: "ls -la /proc/self";
    b33_allow_kill_jobs: "kill $(jobs -p)";
    b33_allow_kill_last_background: "npm run dev & sleep 5; kill $!";
    b33_allow_trap_kill_jobs: "trap 'kill $(jobs -p)' EXIT; npm run dev";
    b33_allow_kill_nginx_pidfile: "kill -HUP $(cat /var/run/nginx.pid)";
    b33_allow_docker_kill_containers: "docker kill $(docker ps -q)";
    b33_allow_branch_name_with_kill: "git checkout -b kill-python-bug";
    b33_allow_pgrep_check: "pgrep -f agent.main && echo running";
    b33_allow_wait_for_pgrep: "while pgrep -f agent.main >/dev/null; do sleep 1; done";
    b33_allow_herd_daemon_start: "herd daemon start";
    b33_allow_exec_host_program: "exec python -m agent.main";
    b33_allow_kill_own_group: "kill -- -$$";
    b33_allow_pkill_own_children: "pkill -9 -P $$";
    b33_allow_printf_numeric_kill_to_sh: "printf 'kill %s\\n' 1234 | sh";
    b33_allow_ps_grep_v_listing: "ps -ef | grep python | grep -v grep";
    b33_allow_regex_test_kill: "[[ $x =~ ^kill ]] && echo y";
    b33_allow_pkill_f_http_server: "pkill -f 'python -m http.server'";
    b33_allow_unquoted_heredoc_prose_to_file: "cat <<EOF > README.md\nTo stop: pkill python\nEOF";
    b33_allow_python_background_server: "nohup python server.py > server.log 2>&1 &";
    b33_allow_commit_message_heredoc: "git commit -m \"$(cat <<'EOF'\nStop using pkill python in tests\n\nThe old helper ran `killall python` which killed the agent.\nEOF\n)\"";
    b33_allow_ssh_remote_pkill: "ssh build-box 'pkill -f gunicorn'";
    b33_allow_docker_exec_pkill: "docker exec web pkill python";
    b33_allow_kubectl_exec_pkill: "kubectl exec -it pod -- pkill python";
    b33_allow_pkill_f_vite_regex: "pkill -f \"node.*vite\"";
    b33_allow_pkill_f_alternation: "pkill -f \"gunicorn|uvicorn\"";
    b33_allow_killall_app_with_space: "killall \"Google Chrome\"";
    b33_allow_kill_saved_server_pid: "SERVER_PID=$!; sleep 2; kill $SERVER_PID";
    b33_allow_kill_app_pidfile_in_case: "case \"$1\" in start) ./run.sh;; stop) kill \"$(cat app.pid)\";; esac";
    b33_allow_launchctl_print: "launchctl print gui/501/ai.herd.daemon";
    b33_allow_journalctl_follow: "journalctl --user -u herd -f";
    b33_allow_start_herd_in_background: "nohup herd serve >/dev/null 2>&1 &";
    b33_allow_history_grep_kill: "history | grep kill";
    b33_allow_watch_ps_grep: "watch -n1 \"ps aux | grep python\"";
    b33_allow_process_substitution_diff: "diff <(sort a.txt) <(sort b.txt)";
    b33_allow_python_prints_kill_prose: "python -c \"print('kill the process with herd kill')\"";
    b33_allow_python_kills_own_child: "python -c \"import subprocess as s; p = s.Popen(['sleep', '9']); p.kill()\"";
    b33_allow_echo_names_into_xargs_pkill_node: "echo node | xargs pkill";
    b33_allow_trap_kill_own_group: "trap 'kill 0' SIGINT SIGTERM EXIT";
    b33_allow_extglob_free_kill_word_in_test: "[[ $cmd == kill* ]] && echo matched";
    b33_allow_sed_edits_pkill_line: "sed -i 's/pkill python/pkill myapp/' scripts/stop.sh";
    b33_allow_herestring_to_cat: "cat <<< \"systemctl restart herd\"";
    b33_allow_docker_run_sh_c: "docker run --rm alpine sh -c 'pkill python || true'";
    b33_allow_pgrep_guard_nginx: "if ! pgrep -x nginx >/dev/null; then nginx; fi";
    b33_allow_for_pgrep_node_kill: "for pid in $(pgrep -f \"node server\"); do kill $pid; done";
    b33_allow_timeout_signal_kill: "timeout --signal=KILL 30 pytest -x";
    b33_allow_python_getppid_print: "python -c \"import os; print(os.getppid())\"";
}
