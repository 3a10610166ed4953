"""What a program of ours says when it is ready (mpstream/proc.py: ready_line), read alike for
the QUIC hop and the mphttp proxy."""


def test_a_programs_ready_line_or_none_when_it_exits_first():
    import subprocess
    import sys

    from mpstream.proc import ready_line

    def run(code: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)

    said = run('print("warming up"); print(\'{"other": 1}\'); '
               'print(\'{"ready": {"listen": "x"}}\')')
    assert ready_line(said, 10) == {"listen": "x"}
    said.wait()
    quiet = run("import sys; sys.exit(3)")
    assert ready_line(quiet, 10) is None and quiet.wait() == 3
    slow = run("import time; time.sleep(30)")
    try:
        assert ready_line(slow, 0.3) is None and slow.poll() is None
    finally:
        slow.kill()
        slow.wait()


def test_await_ready_names_the_program_and_its_last_words_or_the_hint():
    import subprocess
    import sys

    import pytest

    from mpstream.errors import UserError
    from mpstream.proc import await_ready

    def run(code: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)

    ok = run('print(\'{"ready": {"port": 5}}\')')
    assert await_ready(ok, "the proxy", 10, lambda: "unused") == {"port": 5}
    ok.wait()
    with pytest.raises(UserError, match=r"^the proxy exited \(3\) before it was ready: "
                                        r"no such origin$"):
        await_ready(run("import sys; sys.exit(3)"), "the proxy", 10, lambda: "no such origin")
    slow = run("import time; time.sleep(30)")
    with pytest.raises(UserError, match=r"^the proxy was not ready after 0.3 s \(is it up\?\)$"):
        await_ready(slow, "the proxy", 0.3, lambda: "", " (is it up?)")
    assert slow.poll() is not None  # stopped, not left behind



def test_child_pids_by_name_reads_each_process_once_and_leaves_out_the_exited(tmp_path):
    """The name comes from the same read of /proc/PID/stat as the parent: a child that exits
    between listing and naming is left out, not an error (a test raced on that once). A name
    may hold spaces and parentheses."""
    import os
    import shutil
    import signal
    import subprocess
    import sys

    from mpstream.proc import child_pids
    from tests.waiting import wait_until

    odd = tmp_path / "odd ) (x"
    shutil.copy(shutil.which("sleep"), odd)
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys, time\n"
         f"a = subprocess.Popen(['sleep', '30']); b = subprocess.Popen([{str(odd)!r}, '30'])\n"
         "c = subprocess.Popen(['true']); c.wait()\n"
         "print('ready', flush=True); time.sleep(30)\n"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline() == "ready\n"
        sleeps = wait_until(lambda: child_pids(parent.pid, "sleep"), 10, "sleep starts", 0.05)
        oddly = child_pids(parent.pid, "odd ) (x")
        assert len(sleeps) == 1 and len(oddly) == 1
        assert child_pids(parent.pid) == sleeps | oddly  # `true` was reaped: not a child now
        assert child_pids(parent.pid, "ffmpeg") == set()
    finally:
        for pid in child_pids(parent.pid):
            os.kill(pid, signal.SIGKILL)
        parent.kill()
        parent.wait()


def test_a_child_whose_parent_died_before_it_asked_to_follow_it_ends_at_once():
    """The parent killed between the fork and the child's PR_SET_PDEATHSIG: no signal would
    ever come, so the child ends itself when its parent is no longer the one that forked it."""
    import os
    import signal

    from mpstream import proc

    child = os.fork()
    if child == 0:
        proc._forked_from = 1  # not this child's parent: as if the forker had died already
        proc.die_with_parent()
        os._exit(0)
    _, status = os.waitpid(child, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM


def test_a_child_of_a_living_parent_runs_on():
    import subprocess

    from mpstream.proc import die_with_parent

    done = subprocess.run(["true"], preexec_fn=die_with_parent)
    assert done.returncode == 0
