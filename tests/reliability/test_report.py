"""scripts/reliability_report.py: a missing test reads 'not run', a failed one 'FAILED', never 'held'."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_report_verdicts_from_a_junit_file(tmp_path):
    junit = tmp_path / "r.xml"
    junit.write_text("""<?xml version="1.0"?><testsuites><testsuite>
<testcase classname="tests.reliability.test_llm_faults" name="test_refused_connection_is_one_clear_error_fast" time="0.1"/>
<testcase classname="tests.reliability.test_llm_faults" name="test_https_to_a_plain_http_port_says_tls_failed" time="0.1"><failure message="x"/></testcase>
<testcase classname="tests.reliability.test_downloads" name="test_no_space_left_on_a_small_tmpfs" time="0"><skipped/></testcase>
<testcase classname="tests.reliability.test_llm_faults" name="test_something_new" time="0"/>
</testsuite></testsuites>""")
    out = tmp_path / "R.md"
    p = subprocess.run([sys.executable, "scripts/reliability_report.py", str(junit), "-o", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rows = {ln.split(" | ")[1]: ln for ln in out.read_text().splitlines() if ln.startswith("| ") and " | " in ln}
    assert rows["refused connection"].endswith("| 1 | 1 | held | 0.1 |")
    assert "**FAILED**" in rows["TLS failure (https:// to a plain-HTTP port)"]
    assert "| skipped |" in rows["disk full: ENOSPC on a 20 MB tmpfs cache (skipped without root)"]
    assert sum("| not run |" in r for r in rows.values()) >= 30
    assert "test_llm_faults::test_something_new" in out.read_text()  # unmapped tests are listed
