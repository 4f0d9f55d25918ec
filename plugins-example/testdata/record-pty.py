#!/usr/bin/env python3
"""Runs a shell command under a fresh PTY (120x40, TERM=xterm-256color) and
writes every byte the PTY master reads to a file, unchanged.

Usage: record-pty.py OUT.log 'shell command'
"""
import fcntl
import os
import pty
import struct
import sys
import termios


def main() -> int:
    out_path, command = sys.argv[1], sys.argv[2]
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.environ["COLUMNS"] = "120"
        os.environ["LINES"] = "40"
        # The child's stdin is the PTY slave: size it before the command starts.
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        os.execvp("sh", ["sh", "-c", command])
    with open(out_path, "wb") as out:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out.write(chunk)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
