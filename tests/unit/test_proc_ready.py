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
