"""An etcdutl/etcdctl that never exits (issue 19 §3): at the deadline the tool and every process of its group are
killed - a wrapper script whose child holds the output pipes included, which `subprocess.run(timeout=...)` alone
waits for forever - and the error names the tool and the time spent. Fake tools are shell scripts: `version`
answers, everything else sleeps in a child process."""

import os
import subprocess
import time

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.commands import run_bounded
from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import DeadlineExceeded
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member import binaries
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, SnapshotInvalid
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.restore_tool import run_restore_tool
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.verify import snapshot_status

TIMEOUT = 1.0
SLACK = 3.0   # a loaded 2-core machine starts and kills processes late; still far below the tool's 300 s sleep
# `version` answers; anything else starts a child that holds stdout/stderr and sleeps; the pid file names it
HANGS = '''#!/bin/sh
if [ "$1" = version ]; then echo "etcdutl version: 3.5.99"; exit 0; fi
sleep 300 &
echo $! > "%(pids)s"
wait
'''
SILENT_PROBE = '#!/bin/sh\nsleep 300 &\necho $! > "%(pids)s"\nwait\n'


def fake_tool(tmp_path, script):
    path = tmp_path / 'bin' / 'etcdutl'
    path.parent.mkdir(exist_ok=True)
    pids = tmp_path / 'child.pid'
    path.write_text(script % {'pids': pids})
    path.chmod(0o755)
    return str(path), pids


def child_gone(pids):
    pid = int(pids.read_text())
    for _attempt in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def timed(call, error):
    started = time.monotonic()
    with pytest.raises(error) as caught:
        call()
    return time.monotonic() - started, caught.value


def test_run_bounded_kills_the_whole_group(tmp_path):
    tool, pids = fake_tool(tmp_path, HANGS)
    took, exc = timed(lambda: run_bounded([tool, 'snapshot', 'status'], TIMEOUT), DeadlineExceeded)
    assert took < TIMEOUT + SLACK, took
    assert str(exc).startswith('etcdutl snapshot gave up after') and 'process group' in str(exc)
    assert child_gone(pids)
    done = run_bounded(['sh', '-c', 'echo out; echo err >&2; exit 3'], 10)
    assert (done.returncode, done.stdout, done.stderr) == (3, 'out\n', 'err\n')


def test_subprocess_run_alone_would_wait_for_the_child(tmp_path):
    """Why run_bounded exists: subprocess.run kills the script, then waits for the pipes its child holds."""
    tool, pids = fake_tool(tmp_path, HANGS)
    started = time.monotonic()
    proc = subprocess.Popen([tool, 'x'], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.communicate(timeout=TIMEOUT)
    proc.kill()
    with pytest.raises(subprocess.TimeoutExpired):
        proc.communicate(timeout=TIMEOUT)   # the child still holds the pipes
    os.kill(int(pids.read_text()), 9)
    proc.communicate()
    assert time.monotonic() - started >= 2 * TIMEOUT


def test_snapshot_status_and_restore_are_bounded_by_tool_timeout(tmp_path):
    tool, pids = fake_tool(tmp_path, HANGS)
    bounded = binaries.ToolPath(tool, TIMEOUT)
    snapshot = tmp_path / 'snap.db'
    snapshot.write_bytes(b'\0' * 4096)
    took, exc = timed(lambda: snapshot_status(str(snapshot), bounded), SnapshotInvalid)
    assert took < TIMEOUT + SLACK and 'etcdutl snapshot status %s gave up after' % snapshot in str(exc), (took, exc)
    assert child_gone(pids)
    took, exc = timed(lambda: run_restore_tool(str(snapshot), str(tmp_path / 'data'), name='m1',
                                               initial_cluster='m1=http://127.0.0.1:2380', initial_cluster_token='t',
                                               initial_advertise_peer_urls=['http://127.0.0.1:2380'], tool=bounded),
                      EtcdError)
    assert took < TIMEOUT + SLACK and 'etcdutl snapshot restore gave up after' in str(exc), (took, exc)
    assert child_gone(pids)


def test_a_tool_that_does_not_answer_its_version_is_refused_naming_the_option(tmp_path):
    tool, pids = fake_tool(tmp_path, SILENT_PROBE)
    took, exc = timed(lambda: binaries.resolve_tools(etcdutl_path=tool, tool_timeout=TIMEOUT), InvalidInput)
    assert took < TIMEOUT + SLACK, took
    assert (exc.field, exc.rule) == ('etcdutl_path', 'runs') and 'gave up after' in str(exc)
    assert child_gone(pids)


@pytest.mark.parametrize('value', [0, -1, float('nan'), 1e999])
def test_tool_timeout_is_checked(value):
    with pytest.raises(InvalidInput) as caught:
        binaries.resolve_tools(tool_timeout=value)
    assert caught.value.field == 'tool_timeout'
