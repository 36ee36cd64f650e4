"""requirements/system_packages.py, the reader of bindep.txt the Makefile runs before the venv exists, gives the
same answers as bindep itself (the venv's `bindep`, which ansible-builder brings) on this Debian machine: for the
repository's bindep.txt and for a file that uses every selector form the reader knows."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BINDEP = os.path.join(os.path.dirname(sys.executable), 'bindep')
SCRIPT = os.path.join(REPO, 'requirements', 'system_packages.py')

spec = importlib.util.spec_from_file_location('system_packages', SCRIPT)
system_packages = importlib.util.module_from_spec(spec)
spec.loader.exec_module(system_packages)

pytestmark = pytest.mark.skipif(not shutil.which('dpkg-query') or not os.path.exists(BINDEP),
                                reason='needs a Debian machine and the venv\'s bindep')

SELECTORS = """\
# every selector form
plain-a
deb-only [platform:dpkg]
rpm-only [platform:rpm]
not-deb [!platform:dpkg]
test-deb [test platform:dpkg]
doc-only [doc]
not-test [!test]
test-or-doc [test doc]
"""


def bindep_list(path, *profiles):
    proc = subprocess.run([BINDEP, '-f', path, '-l', 'newline'] + list(profiles), capture_output=True, text=True,
                          check=False)
    return sorted(n for n in proc.stdout.split() if n)


def ours(path, *profiles):
    with open(path) as f:
        return sorted(system_packages.wanted(f, list(profiles), system_packages.platforms()))


def test_the_selection_is_bindeps(tmp_path):
    """Every selector form bindep.txt uses (and their negations), with no profile, one and two (bindep takes
    seconds to start: three calls)."""
    selectors = tmp_path / 'bindep.txt'
    selectors.write_text(SELECTORS + open(os.path.join(REPO, 'bindep.txt')).read())
    for profiles in ((), ('test',), ('test', 'doc')):
        assert ours(str(selectors), *profiles) == bindep_list(str(selectors), *profiles), profiles


def test_the_test_profile_has_what_the_demo_lab_and_tests_need():
    wanted = ours(os.path.join(REPO, 'bindep.txt'), 'test')
    for package in ('etcd-server', 'etcd-client', 'haproxy', 'prometheus', 'python3-venv'):
        assert package in wanted
    # the modules' managed nodes (no profile) keep only etcd's client tools
    assert ours(os.path.join(REPO, 'bindep.txt')) == ['etcd-client']


def test_missing_names_a_package_that_is_not_installed(tmp_path):
    path = tmp_path / 'bindep.txt'
    path.write_text('steward-no-such-package [test platform:dpkg]\ncoreutils [test platform:dpkg]\n')
    proc = subprocess.run([sys.executable, SCRIPT, 'missing', 'test', '--file', str(path)], capture_output=True,
                          text=True, check=True)
    assert proc.stdout.split() == ['steward-no-such-package']
    assert subprocess.run([sys.executable, SCRIPT, 'missing', '--file', str(path)], capture_output=True, text=True,
                          check=True).stdout == ''


def test_the_makefile_without_root_prints_the_one_command(tmp_path):
    """A non-root `make` with a package missing stops before anything else, naming the command."""
    if os.getuid() != 0:
        pytest.skip('runs make as nobody, which needs root to switch to')
    proc = subprocess.run(['setpriv', '--reuid', '65534', '--regid', '65534', '--clear-groups', 'make', '-B', '-s',
                           '-C', REPO, 'system-packages', 'SYSTEM_MISSING=echo steward-no-such-package',
                           'BUILD=%s' % tmp_path], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0
    assert "apt-get install -y steward-no-such-package'" in proc.stderr, proc.stderr
    assert not os.path.exists(tmp_path / '.system-packages.stamp')
