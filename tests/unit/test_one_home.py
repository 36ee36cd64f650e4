"""One home per helper (issue 24): the shared helpers are defined once, in plugins/ and the controller together,
and the idioms they replace do not come back beside them. Read from the source; nothing is imported."""

from __future__ import annotations

import ast
import functools
import os
import re
from typing import Dict, Iterator, List

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))

# name -> its one home (a path below plugins/module_utils)
HOMES = {
    'write_atomic': 'common/files.py', 'open_private': 'common/files.py', 'makedirs_private': 'common/files.py',
    'fsync_path': 'common/files.py',
    'parse_rfc3339': 'common/times.py', 'parse_rfc3339_ns': 'common/times.py', 'format_rfc3339': 'common/times.py',
    'format_rfc3339_ns': 'common/times.py',
    'retry_until': 'common/deadline.py', 'doubled': 'common/deadline.py', 'jittered_backoff': 'common/deadline.py',
    'TokenBucket': 'common/ratelimit.py',
    'parse_bool': 'common/golang.py',
    'url_host': 'common/netaddr.py',
    'systemctl': 'common/systemd.py',
    'client_context': 'common/tls.py', 'server_context': 'common/tls.py',
    'positive_duration': 'common/durations.py',
    'argspec': 'common/argspec.py',
    'load_yaml': 'common/yaml_text.py',
    'merge_patch': 'kube/objects.py',
    'secret_data': 'kube/secrets.py', 'secret_text': 'kube/secrets.py', 'read_secret': 'kube/secrets.py',
    'lease_spec': 'kube/lease.py', 'seconds_left': 'kube/lease.py',
    'selector_matches': 'kube/selectors.py', 'labels_match': 'kube/selectors.py',
    'classify_pods': 'kube/drain.py', 'drain': 'kube/drain.py', 'cordon': 'kube/drain.py', 'eviction_body': 'kube/drain.py',
}
# Methods of these names are another thing (KubeClient.merge_patch sends one); only module-level definitions count.
# Controller-side wrappers with the same name that adapt the loop's runtime are listed here with the reason.
ALLOWED_TWINS = {
    ('read_secret', 'controller/steward_controller/etcd_backup/handlers.py'),   # recasts to the loop's SpecError
}

# Files that rename into place with their own protocol (snapshot publishing, data-dir swaps, teardown moves); every
# other file is written through common/files.write_atomic. plugins/modules/join_script.py: helper `modules` moves
# its writer into the engine onto write_atomic.
RENAMES_ALLOWED = {'common/files.py', 'local_store.py', 's3_store.py', 'local_member.py', 'restore.py', 'teardown.py',
                   'modules/join_script.py'}


def python_files(*tops: str) -> Iterator[str]:
    for top in tops:
        for root, dirs, files in os.walk(os.path.join(REPO, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith('.') and d != '__pycache__')
            for name in sorted(files):
                if name.endswith('.py'):
                    yield os.path.relpath(os.path.join(root, name), REPO)


@functools.lru_cache(maxsize=1)
def module_level_definitions() -> Dict[str, List[str]]:
    found: Dict[str, List[str]] = {}
    for path in python_files('plugins', 'controller'):
        with open(os.path.join(REPO, path), encoding='utf-8') as f:
            tree = ast.parse(f.read(), path)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in HOMES:
                found.setdefault(node.name, []).append(path)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id in HOMES:
                        found.setdefault(target.id, []).append(path)   # an alias is a second home too
    return found


@pytest.mark.parametrize('name', sorted(HOMES))
def test_defined_once_in_its_home(name):
    homes = [p for p in module_level_definitions().get(name, []) if (name, p) not in ALLOWED_TWINS]
    assert homes == [os.path.join('plugins', 'module_utils', HOMES[name])]


def source_lines(*tops: str) -> Iterator[tuple]:
    for path in python_files(*tops):
        with open(os.path.join(REPO, path), encoding='utf-8') as f:
            for number, line in enumerate(f, 1):
                yield path, number, line


def test_no_hand_made_rfc3339_or_ipv6_url_hosts():
    strftime = re.compile(r"""strftime\(['"]%Y-%m-%dT""")
    brackets = re.compile(r"""['"]\[%s\]['"] % .* if ':' in """)
    wrong = ['%s:%d: %s' % (path, number, line.strip()) for path, number, line in source_lines('plugins', 'controller')
             if strftime.search(line) or (brackets.search(line) and not path.endswith('common/netaddr.py'))]
    assert wrong == [], 'use common/times.format_rfc3339 and common/netaddr.url_host'


def test_files_are_renamed_into_place_only_by_write_atomic_or_a_listed_protocol():
    rename = re.compile(r'\bos\.(replace|rename)\(')
    wrong = ['%s:%d' % (path, number) for path, number, line in source_lines('plugins', 'controller')
             if rename.search(line) and not any(path.endswith(allowed) for allowed in RENAMES_ALLOWED)]
    assert wrong == [], 'write files through common/files.write_atomic (it fsyncs the directory after the rename)'


def test_tls_contexts_are_built_only_by_common_tls():
    """Every TLS context of plugins/ and the controller comes from common/tls (client_context, server_context), so
    a connection cannot quietly differ in its checks from the others."""
    builders = re.compile(r'\bssl\.(create_default_context|SSLContext|_create_unverified_context)\(|\bSSLContext\(')
    wrong = ['%s:%d: %s' % (path, number, line.strip()) for path, number, line in source_lines('plugins', 'controller')
             if builders.search(line) and path != os.path.join('plugins', 'module_utils', 'common', 'tls.py')]
    assert wrong == [], 'build TLS contexts with common/tls.client_context or server_context'
