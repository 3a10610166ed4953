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
