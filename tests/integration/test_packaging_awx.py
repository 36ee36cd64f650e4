"""AWX / AAP: what an execution environment build finds in the collection, and a job run the way AWX
runs one - ansible-runner with a private data dir (project, inventory, env/extravars, env/envvars) against
the collection installed offline from its Galaxy tarball.

`ansible-builder introspect` reads the installed collection's meta/execution-environment.yml exactly as
an image build does; `ansible-builder create` validates the image definition of docs/awx/ and writes its
build context (building the image itself needs a container engine, which CI does not have)."""

from __future__ import annotations

import ast
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from support.galaxy import REPO, VENV_BIN, installed_only_env

# Top-level import -> the distribution that provides it (what requirements.txt must name).
DISTRIBUTIONS = {'yaml': 'PyYAML', 'boto3': 'boto3', 'botocore': 'boto3',
                 's3transfer': 'boto3', 'urllib3': 'kubernetes',
                 'kubernetes': 'kubernetes', 'requests': 'requests',
                 'cryptography': 'cryptography', 'google': 'protobuf'}
# Named in requirements.txt although never imported by our code, and why.
INDIRECT: dict = {}  # none today (etcd-sdk-python and its grpcio were, until the etcd engine spoke gRPC itself)
LOCAL = ('ansible_collections', 'ansible', '__future__')


def requirement_names(path):
    names = []
    for line in open(path):
        line = line.split('#', 1)[0].strip()
        if line:
            names.append(re.match(r'[A-Za-z0-9_.-]+', line).group(0))
    return names


def third_party_imports():
    """{top-level module: [files]} imported by plugins/ that is neither the standard library nor Ansible."""
    found = {}
    for path in glob.glob(os.path.join(REPO, 'plugins', '**', '*.py'), recursive=True):
        tree = ast.parse(open(path).read())
        for node in ast.walk(tree):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for module in modules:
                top = module.split('.')[0]
                if top not in sys.stdlib_module_names and top not in LOCAL:
                    found.setdefault(top, []).append(os.path.relpath(path, REPO))
    return found


def test_requirements_txt_names_exactly_what_the_plugins_import():
    declared = requirement_names(os.path.join(REPO, 'requirements.txt'))
    imported = third_party_imports()
    unknown = sorted(set(imported) - set(DISTRIBUTIONS))
    assert not unknown, 'plugins import %s: add the distribution to DISTRIBUTIONS here and to requirements.txt (%s)' % (
        unknown, {u: imported[u][:3] for u in unknown})
    needed = {DISTRIBUTIONS[m] for m in imported}
    assert needed - set(declared) == set(), 'requirements.txt lacks %s' % sorted(needed - set(declared))
    extra = set(declared) - needed - set(INDIRECT)
    assert not extra, 'requirements.txt names %s, which no plugin imports' % sorted(extra)


def test_introspect_finds_the_python_and_system_requirements(installed_collection):
    path = installed_collection[0]
    proc = subprocess.run([os.path.join(VENV_BIN, 'ansible-builder'), 'introspect', '--sanitize', path],
                          capture_output=True, text=True, timeout=120, env=installed_only_env(path), check=True)
    data = yaml.safe_load(proc.stdout[proc.stdout.index('---'):])
    python = [line.split('  # from collection steward.cluster')[0] for line in data['python']]
    system = [line.split('  # from collection steward.cluster')[0] for line in data['system']]
    declared = [line.split('#', 1)[0].strip() for line in open(os.path.join(REPO, 'requirements.txt'))]
    # ansible-builder drops what ansible-core itself brings (PyYAML)
    assert python == [d for d in declared if d and not d.startswith('PyYAML')], python
    assert all('# from collection steward.cluster' in line for line in data['python'] + data['system'])
    assert 'etcd-client [platform:dpkg]' in system and any(s.startswith('etcd ') for s in system), system


def test_the_image_definition_is_valid_and_installs_etcds_tools(tmp_path):
    context = tmp_path / 'context'
    subprocess.run([os.path.join(VENV_BIN, 'ansible-builder'), 'create', '-f',
                    os.path.join(REPO, 'docs', 'awx', 'execution-environment.yml'), '-c', str(context),
                    '--output-filename', 'Containerfile'], capture_output=True, text=True, timeout=120, check=True)
    containerfile = (context / 'Containerfile').read_text()
    requirements = yaml.safe_load((context / '_build' / 'requirements.yml').read_text())
    assert [c['name'] for c in requirements['collections']][:1] == ['steward.cluster']
    assert 'ansible-core==2.19.14' in containerfile and 'ansible-runner==2.4.3' in containerfile
    # the same etcd release and checksum as the controller image
    dockerfile = open(os.path.join(REPO, 'controller', 'Dockerfile')).read()
    version = re.search(r'ARG ETCD_VERSION=(\S+)', dockerfile).group(1)
    sha256 = re.search(r'ARG ETCD_SHA256_AMD64=(\S+)', dockerfile).group(1)
    assert 'ARG ETCD_VERSION=%s' % version in containerfile and 'ARG ETCD_SHA256=%s' % sha256 in containerfile
    assert 'sha256sum -c -' in containerfile and '/usr/local/bin/etcdutl version' in containerfile


def test_the_awx_project_has_a_playbook_per_collection_playbook():
    project = os.path.join(REPO, 'docs', 'awx', 'project')
    for path in sorted(glob.glob(os.path.join(REPO, 'playbooks', '*.yml'))):
        name = os.path.basename(path)[:-4]
        wrapper = os.path.join(project, name + '.yml')
        assert os.path.isfile(wrapper), 'docs/awx/project/%s.yml is missing (one job template per playbook)' % name
        plays = yaml.safe_load(open(wrapper))
        assert plays == [{'name': 'Run steward.cluster.' + name, 'ansible.builtin.import_playbook': 'steward.cluster.' + name}]
        assert '`steward.cluster.%s`' % name in open(os.path.join(REPO, 'docs', 'awx.md')).read(), (
            'docs/awx.md has no job template for steward.cluster.%s' % name)


# --- a job, as AWX runs it ------------------------------------------------------------------------------
@pytest.fixture
def private_data_dir(tmp_path, installed_collection, sabakan_server):
    """What AWX writes for a job of the 'sabakan sync' template (docs/awx.md): the project's playbook (the one
    docs/awx/project/ ships), the inventory, the template's extra vars and the collections path AWX sets."""
    path = installed_collection[0]
    pdd = tmp_path / 'job'
    for sub in ('project', 'inventory', 'env'):
        (pdd / sub).mkdir(parents=True)
    shutil.copy(os.path.join(REPO, 'docs', 'awx', 'project', 'sabakan_sync.yml'), str(pdd / 'project'))
    (pdd / 'inventory' / 'hosts').write_text(
        'localhost ansible_connection=local ansible_python_interpreter=%s\n' % sys.executable)
    work = tmp_path / 'cke'
    work.mkdir()
    (work / 'template.yml').write_text(open(os.path.join(REPO, 'lab', 'sabakan-template.yml')).read())
    extravars = {'sabakan_url': sabakan_server.url, 'sabakan_cluster_file': str(work / 'cluster.yml'),
                 'sabakan_template_file': str(work / 'template.yml'),
                 'sabakan_constraints': {'control-plane-count': 3, 'minimum-workers': 6}}
    (pdd / 'env' / 'extravars').write_text(yaml.safe_dump(extravars))
    (pdd / 'env' / 'envvars').write_text(yaml.safe_dump({'ANSIBLE_COLLECTIONS_PATH': path,
                                                         'ANSIBLE_COLLECTIONS_SCAN_SYS_PATH': 'false'}))
    (pdd / 'env' / 'settings').write_text(yaml.safe_dump({'job_timeout': 600, 'idle_timeout': 300}))
    return pdd, work, path


def test_a_job_runs_through_ansible_runner_like_awx(private_data_dir):
    pdd, work, path = private_data_dir
    proc = subprocess.run([os.path.join(VENV_BIN, 'ansible-runner'), 'run', str(pdd), '-p', 'sabakan_sync.yml',
                           '--ident', 'job-1'], capture_output=True, text=True, timeout=900,
                          env=installed_only_env(path), check=False)
    artifacts = pdd / 'artifacts' / 'job-1'
    status = (artifacts / 'status').read_text().strip()
    assert status == 'successful' and proc.returncode == 0, (status, proc.stdout[-4000:], proc.stderr[-2000:])
    assert (artifacts / 'rc').read_text().strip() == '0'
    events = [json.load(open(p)) for p in sorted(glob.glob(str(artifacts / 'job_events' / '*.json')))]
    results = {e['event_data']['resolved_action']: e['event_data']['res'] for e in events
               if e['event'] == 'runner_on_ok' and e['event_data'].get('resolved_action', '').startswith('steward.cluster.')}
    assert set(results) == {'steward.cluster.sabakan_cluster', 'steward.cluster.sabakan_repair'}, sorted(results)
    generated = results['steward.cluster.sabakan_cluster']
    assert generated['changed'] is True and generated['operation']
    cluster = yaml.safe_load((work / 'cluster.yml').read_text())
    assert sum(1 for n in cluster['nodes'] if n['control_plane']) == 3
    # the tasks came from the installed collection, not from the checkout
    task_paths = {e['event_data'].get('task_path', '') for e in events if e['event'] == 'runner_on_ok'}
    assert any(p.startswith(os.path.join(path, 'ansible_collections', 'steward', 'cluster')) for p in task_paths)
    assert not any(REPO in p for p in task_paths), task_paths
