"""A real bash in a bubblewrap sandbox: scripted chores (files, text, archives) with checkers.

Why a sandbox and not a working directory: the agent's commands are untrusted and the host
process may run as root, so every episode gets its own mount, user, pid, network, ipc and uts
namespaces (bubblewrap, `apt-get install bubblewrap`). Its `/` holds exactly `bin dev etc home lib*
proc sbin tmp usr var`, all read-only but its home and tmpfs. Of the host it sees exactly:

- `/usr`, read-only;
- `/etc`, read-only and whole: every file of the host's /etc that the file's mode lets any user read
  (`/etc/hosts`, `/etc/resolv.conf`, `/etc/os-release`, package, locale and service configuration:
  keep secrets out of a world-readable /etc), except `/etc/passwd` and `/etc/group`, replaced by the
  sandbox's own (naming `root`, `agent` uid 1000 and `nobody`). Host files are owned by an unmapped
  user there and their modes hold, so a root-only file such as `/etc/shadow` cannot be read;
- `/bin`, `/sbin`, `/lib`, `/lib32`, `/lib64`, `/libx32` where the host has them, as links where they
  are links (merged /usr), else read-only;
- what the kernel itself shows: the kernel version (`uname -r`), and in its own /proc (its own
  processes only) the system-wide files such as /proc/cpuinfo and /proc/meminfo.

Nothing else of the host: no /root, /opt, /mnt, /srv, /run, /sys or /var of the host, no /home of
others, no project directory, no device but the minimal /dev below. Its own are:

- a fresh home, `/home/agent` (a host temporary directory bound read-write, removed on close and at
  the next reset), which is also the working directory, alone in a read-only `/home`;
- a private /tmp and /dev/shm (tmpfs of `tmp_mb` each, `/var/tmp` a link to /tmp), a minimal
  /dev (null, zero, full, random, urandom, tty, pts, fd, the std streams; no new file there): nothing the
  agent does is written outside its home and its private tmpfs;
- no network (only its own loopback), hostname `sandbox`;
- only HOME, PATH, USER, LANG=C.UTF-8, TERM=dumb, HOSTNAME and TZ=UTC in the environment (nothing
  of the host's, also not in /proc/1/environ);
- limits (hard rlimits of the shell and everything it starts): `cpu_s` seconds of CPU per process,
  `memory_mb` of address space, files up to `file_mb`, `max_procs` processes (counted inside the
  sandbox's user namespace); a host root never runs the sandbox as root: bubblewrap is started as
  `nobody` so the process limit holds. Each command has a wall-clock limit `timeout_s`: when it
  passes, the command is interrupted (SIGINT to the shell's process group, as Ctrl-C does, then
  SIGKILL to what still runs), the observation says so and the episode goes on in the same shell
  (a shell that ignores SIGINT is replaced by a new one in the same directory, with a note). The home lives on the host's disk:
  while a command runs, its size is checked every quarter second and a command that takes it past
  `disk_mb` is interrupted the same way (so a quota overshoot is bounded by what can be written in
  that time; a quick command that ends over quota gets a note).

Bash runs interactively (`bash -i --norc --noediting`, so error messages read as in a terminal:
`bash: foo: command not found`) but talks through pipes, one persistent shell per episode (`cd`,
variables and functions persist). Each command is sent as one line that `eval`s it with stdin
from /dev/null and then prints a random-nonce marker with the exit status and working directory;
stdout and stderr share one pipe, interleaved as a terminal shows them; a program waiting for
keyboard input reads end-of-file. Actions are command lines (text, or a tool call whose arguments
carry `command`). Observations are rendered
like a terminal: the prompt (`agent@sandbox:~/docs$ `), the echoed command (continuation lines
prefixed `> `), its output, bracketed notes of the environment (`[command timed out ...]`), then the
next prompt. The opening observation is a one-line task banner and the first prompt. The only text
removed from the shell's output is bash's `tcsetattr: Inappropriate ioctl for device` complaint
(pipe chrome: it follows any command killed by a signal). Output beyond `max_output_bytes` is cut
with a note.

Processes still running when a command returns (`sleep 9 &`, a fork bomb) are stopped and killed
before the next command: background jobs do not outlive their command line, so their late output
never lands in another observation. `exit` (or anything that ends the shell) starts a new shell in
the home directory, with a note. `set -x` traces the wrapper line too. bubblewrap's
`--die-with-parent` ties a sandbox to the thread that started it, so sandboxes are started from one
long-lived launcher thread: an environment reset in a short-lived thread (a Streamlit rerun) keeps
its shell.

Episodes end (`terminated`) on the step whose command makes the chore's checker pass (reward 1);
a policy may also stop earlier. `info`: `task`, `won` (the checker, evaluated after every step),
`exit_code` (124 after a timeout), `cwd`, `timed_out`. The expert offers the chore's gold commands
in order; one counts as done when it is the command just run. `seed` is accepted and ignored:
every chore's files are fixed.

Determinism: the same commands on the same chore give the same observations. Things that differ by
nature: times (`date`, mtimes of files the agent creates, `ps` start times; set-up files all carry
2024-01-01 00:00 UTC), directory order of unsorted listings (`find`, `ls -f`, `tar -v` on some file
systems), directory sizes and `total` in `ls -l` (they follow the host's file system), host paths
in /proc/self/mountinfo, timing of output from concurrent processes, and anything after a timeout. Process ids restart at 1 in every episode's pid namespace. The gold
commands avoid all of these.
"""

from __future__ import annotations

from worldsmith.envs.shell.env import ShellEnv
from worldsmith.envs.shell.sandbox import HOME, sandbox_available

__all__ = ["HOME", "ShellEnv", "sandbox_available"]
