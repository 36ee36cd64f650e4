"""The collection as its users get it: the Galaxy tarball (built like `make dist`), installed offline
into an empty collections path, and an environment that sees only that install.

Building takes a few seconds: the tarball is built once per test run and shared by every xdist worker
(a lock file in the run's shared temp dir decides who builds)."""

from __future__ import annotations

import fcntl
import glob
import os
import subprocess
import sys
from typing import Dict

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_BIN = os.path.dirname(sys.executable)
NAMESPACE, NAME = 'steward', 'cluster'
# plugins/<dir> -> the ansible-doc type of its plugins; each <name>.py is one plugin named <name>
# (filter and test plugins are documented by <name>.yml files instead).
PLUGIN_DIRS = {
    'modules': 'module', 'inventory': 'inventory', 'lookup': 'lookup', 'callback': 'callback',
    'connection': 'connection', 'become': 'become', 'cache': 'cache', 'vars': 'vars', 'strategy': 'strategy',
    'filter': 'filter', 'test': 'test',
}
NOT_PLUGINS = ('module_utils', 'doc_fragments', 'plugin_utils', 'action', '__pycache__')


def galaxy_meta() -> Dict:
    with open(os.path.join(REPO, 'galaxy.yml')) as f:
        return yaml.safe_load(f)


def build_collection(output_dir: str) -> str:
    """`ansible-galaxy collection build` from the repository root (what `make dist` runs); the tarball's path."""
    os.makedirs(output_dir, exist_ok=True)
    subprocess.run([os.path.join(VENV_BIN, 'ansible-galaxy'), 'collection', 'build', '--force', '--output-path',
                    output_dir, REPO], check=True, capture_output=True, text=True, timeout=300)
    meta = galaxy_meta()
    return os.path.join(output_dir, '%s-%s-%s.tar.gz' % (meta['namespace'], meta['name'], meta['version']))


def shared_tarball(shared_dir: str) -> str:
    """One tarball per test run, whichever worker asks first builds it."""
    os.makedirs(shared_dir, exist_ok=True)
    with open(os.path.join(shared_dir, 'build.lock'), 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = glob.glob(os.path.join(shared_dir, 'dist', '*.tar.gz'))
        if built:
            return built[0]
        return build_collection(os.path.join(shared_dir, 'dist'))


def installed_only_env(collections_path: str, **extra: str) -> Dict[str, str]:
    """An environment in which Ansible finds steward.cluster only in `collections_path`: no build tree on
    ANSIBLE_COLLECTIONS_PATH or PYTHONPATH, and no scanning of sys.path (belt and braces: nothing on the venv's
    sys.path holds the checkout, test_packaging_galaxy.py checks that)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_') and k not in ('PYTHONPATH',)}
    env.update({
        'ANSIBLE_COLLECTIONS_PATH': collections_path,
        'ANSIBLE_COLLECTIONS_SCAN_SYS_PATH': 'false',
        'ANSIBLE_NOCOLOR': '1',
        'ANSIBLE_LOCALHOST_WARNING': 'false',
        'ANSIBLE_INVENTORY_UNPARSED_WARNING': 'false',
        'PATH': os.pathsep.join([VENV_BIN, '/usr/bin', '/bin']),
    })
    env.update(extra)
    return env


def install_collection(tarball: str, collections_path: str) -> str:
    """Install offline, without dependencies, into an empty collections path; the installed collection's dir."""
    os.makedirs(collections_path, exist_ok=True)
    proc = subprocess.run([os.path.join(VENV_BIN, 'ansible-galaxy'), 'collection', 'install', '--offline', '--no-deps',
                           '-p', collections_path, tarball], capture_output=True, text=True, timeout=300,
                          env=installed_only_env(collections_path), check=False)
    if proc.returncode != 0:
        raise RuntimeError('ansible-galaxy collection install failed (rc=%d): %s%s'
                           % (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:]))
    return os.path.join(collections_path, 'ansible_collections', NAMESPACE, NAME)


def expected_plugins() -> Dict[str, list]:
    """{ansible-doc type: sorted FQCNs} of every plugin in the checkout's plugins/ (modules included)."""
    found: Dict[str, list] = {}
    plugins = os.path.join(REPO, 'plugins')
    for entry in sorted(os.listdir(plugins)):
        if entry in NOT_PLUGINS or not os.path.isdir(os.path.join(plugins, entry)):
            continue
        if entry not in PLUGIN_DIRS:
            raise AssertionError('plugins/%s: unknown plugin directory; add it to PLUGIN_DIRS in %s' % (entry, __file__))
        kind = PLUGIN_DIRS[entry]
        suffix = '.yml' if kind in ('filter', 'test') else '.py'
        names = [f[:-len(suffix)] for f in os.listdir(os.path.join(plugins, entry))
                 if f.endswith(suffix) and not f.startswith('_')]
        found[kind] = sorted('%s.%s.%s' % (NAMESPACE, NAME, n) for n in names)
    return found
