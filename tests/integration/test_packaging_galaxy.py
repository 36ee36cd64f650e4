"""The collection as Galaxy users get it: the tarball's contents and metadata, an offline install into an
empty collections path, and from that install only: `ansible-doc -l` lists every module and plugin,
`ansible-doc` renders each one, and a playbook runs by FQCN against a real etcd.

One tarball and one install serve every test (tests/conftest.py: collection_tarball, installed_collection)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile

import yaml

from support.galaxy import REPO, VENV_BIN, expected_plugins, galaxy_meta, installed_only_env

PROJECT_URL = 'https://github.com/steward-cluster/steward.cluster'
# Never in what users download: state of a developer's checkout or of CI.
FORBIDDEN = re.compile(r'(^|/)(\.venv|\.build|\.lab|\.git|dist|\.pytest_cache|\.hypothesis|__pycache__)(/|$)'
                       r'|^tests/output/|^bench/results/|\.pyc$|\.tar\.gz$|^changelogs/\.plugin-cache\.yaml$')
REQUIRED = ('MANIFEST.json', 'FILES.json', 'README.md', 'LICENSE', 'CHANGELOG.rst', 'changelogs/changelog.yaml',
            'meta/runtime.yml', 'meta/execution-environment.yml', 'requirements.txt', 'bindep.txt', 'docs/awx.md')


def ansible(tool, *args, collections_path, timeout=300, **env):
    proc = subprocess.run([os.path.join(VENV_BIN, tool)] + list(args), capture_output=True, text=True,
                          timeout=timeout, env=installed_only_env(collections_path, **env), cwd='/', check=False)
    assert proc.returncode == 0, '%s %s failed (rc=%d):\n%s\n%s' % (
        tool, ' '.join(args), proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


# --- the tarball --------------------------------------------------------------------------------------
def test_the_tarball_holds_the_collection_and_no_local_state(collection_tarball):
    with tarfile.open(collection_tarball) as tar:
        names = [n[2:] if n.startswith('./') else n for n in tar.getnames()]
    leaked = [n for n in names if FORBIDDEN.search(n)]
    assert not leaked, 'the Galaxy tarball holds local state: %s (add it to build_ignore in galaxy.yml)' % leaked[:20]
    missing = [n for n in REQUIRED if n not in names]
    assert not missing, 'the Galaxy tarball lacks %s' % missing
    for kind, fqcns in expected_plugins().items():
        for fqcn in fqcns:
            short = fqcn.rsplit('.', 1)[1]
            assert any(n.startswith('plugins/') and '/%s.' % short in n for n in names), fqcn


def test_galaxy_metadata_names_the_project(collection_tarball):
    meta = galaxy_meta()
    for key in ('repository', 'documentation', 'homepage', 'issues'):
        assert meta[key].startswith(PROJECT_URL), '%s: %s does not name %s' % (key, meta[key], PROJECT_URL)
    assert meta['description'] and len(meta['tags']) >= 5
    assert all(re.fullmatch(r'[a-z0-9_]{2,64}', t) for t in meta['tags']), meta['tags']
    assert len(meta['tags']) <= 20, 'Galaxy takes at most 20 tags: %d' % len(meta['tags'])
    # every area of the engine (and the controller) is named by a tag and by the description
    engine = os.path.join(REPO, 'plugins', 'module_utils')
    areas = sorted(d for d in os.listdir(engine) if os.path.isdir(os.path.join(engine, d))
                   and d not in ('common', 'kube', '__pycache__')) + ['controller']
    assert not [a for a in areas if a not in meta['tags']], 'galaxy.yml tags lack areas: %s' % areas
    words = {'machines': 'machine', 'provisioning': 'provisioning', 'controller': 'controller'}
    unnamed = [a for a in areas if words.get(a, a) not in meta['description'].lower()]
    assert not unnamed, 'galaxy.yml description does not name %s' % unnamed
    text = open(os.path.join(REPO, 'galaxy.yml')).read()
    assert not re.search(r'example\.(com|invalid|org)|TODO|your[-_ ]', text), 'placeholder left in galaxy.yml'
    with tarfile.open(collection_tarball) as tar:
        manifest = json.load(tar.extractfile('MANIFEST.json'))['collection_info']
    assert manifest['repository'] == meta['repository'] and manifest['issues'] == meta['issues']
    assert manifest['version'] == meta['version']


def test_the_project_urls_are_the_same_everywhere():
    """No other spelling of the project's home (placeholders, a different org) anywhere in the tree."""
    tracked = subprocess.run(['git', 'ls-files'], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    offenders = []
    for path in tracked:
        if path.startswith(('requirements/', 'LICENSE')) or not os.path.isfile(os.path.join(REPO, path)):
            continue
        try:
            text = open(os.path.join(REPO, path), encoding='utf-8').read()
        except UnicodeDecodeError:
            continue
        for match in re.finditer(r'example\.invalid|github\.com/steward[-\w.]*/[\w.-]+|ghcr\.io/[\w.-]+/steward[\w-]*', text):
            if not match.group(0).startswith(('github.com/steward-cluster/steward.cluster',
                                              'ghcr.io/steward-cluster/steward-controller')):
                offenders.append('%s: %s' % (path, match.group(0)))
    assert not offenders, offenders


# --- installed offline, used from the install only ----------------------------------------------------
def test_the_readme_install_installs_and_the_venv_hides_no_checkout(collection_tarball, tmp_path):
    """The README's install line, as a user types it in the venv (Ansible's own defaults, sys.path scanned, only the
    build tree's variables gone): it installs into the empty dir. With the checkout on the venv's sys.path (a .pth
    file) it answered "Nothing to do" and installed nothing; the controller finds the engine without one
    (controller/steward_controller/engine_path.py)."""
    import sysconfig
    site = sysconfig.get_paths()['purelib']
    leaks = [f for f in os.listdir(site) if f.endswith('.pth')
             and REPO in open(os.path.join(site, f), errors='replace').read()]
    assert not leaks, 'the venv puts the checkout on sys.path: %s' % leaks
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'ANSIBLE_COLLECTIONS_PATH')}
    target = str(tmp_path / 'try')
    proc = subprocess.run([os.path.join(VENV_BIN, 'ansible-galaxy'), 'collection', 'install', '--offline', '--no-deps',
                           '-p', target, collection_tarball], capture_output=True, text=True, timeout=300, env=env,
                          cwd='/', check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'Nothing to do' not in proc.stdout, proc.stdout
    installed = os.path.join(target, 'ansible_collections', 'steward', 'cluster')
    assert json.load(open(os.path.join(installed, 'MANIFEST.json')))['collection_info']['version'] == \
        galaxy_meta()['version']
    assert os.path.isfile(os.path.join(installed, 'plugins', 'modules', 'etcd_snapshot.py'))
    # and the controller still runs from anywhere with neither variable set
    help_ = subprocess.run([os.path.join(VENV_BIN, 'steward-controller'), '--help'], capture_output=True, text=True,
                           timeout=120, env=env, cwd='/', check=False)
    assert help_.returncode == 0 and '--controllers' in help_.stdout, help_.stderr[-2000:]


def test_the_install_is_the_only_copy_ansible_sees(installed_collection):
    path, collection = installed_collection
    assert os.path.isfile(os.path.join(collection, 'MANIFEST.json'))
    listed = ansible('ansible-galaxy', 'collection', 'list', 'steward.cluster', '--format', 'json',
                     collections_path=path).stdout
    assert list(json.loads(listed)) == [os.path.join(path, 'ansible_collections')]


def test_the_controller_finds_the_collection_ansible_is_pointed_at(installed_collection):
    """Without PYTHONPATH, the controller imports the engine from ANSIBLE_COLLECTIONS_PATH (an installed release),
    not from the checkout it was installed from (controller/steward_controller/engine_path.py)."""
    path, collection = installed_collection
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'ANSIBLE_COLLECTIONS_PATH')}
    env['ANSIBLE_COLLECTIONS_PATH'] = path
    code = ('from steward_controller.engine_path import ensure_engine; root = ensure_engine(); '
            'from ansible_collections.steward.cluster.plugins.module_utils.kube import client; '
            'print(root); print(client.__file__)')
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120, env=env, cwd='/',
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    root, engine_file = proc.stdout.split()
    assert root == path and engine_file.startswith(collection + os.sep), proc.stdout


def test_ansible_doc_lists_every_module_and_plugin(installed_collection):
    path = installed_collection[0]
    for kind, fqcns in expected_plugins().items():
        listed = json.loads(ansible('ansible-doc', '-t', kind, '-l', 'steward.cluster', '--json',
                                    collections_path=path).stdout)
        assert sorted(listed) == fqcns, '%s plugins listed by ansible-doc differ from plugins/: %s' % (
            kind, sorted(set(fqcns) ^ set(listed)))
    roles = json.loads(ansible('ansible-doc', '-t', 'role', '-l', 'steward.cluster', '--json',
                               collections_path=path).stdout)
    expected_roles = sorted('steward.cluster.' + r for r in os.listdir(os.path.join(REPO, 'roles')))
    assert sorted(roles) == expected_roles


def test_ansible_doc_renders_each_module_plugin_and_role(installed_collection):
    path, collection = installed_collection
    kinds = dict(expected_plugins())
    kinds['role'] = sorted('steward.cluster.' + r for r in os.listdir(os.path.join(REPO, 'roles')))
    for kind, fqcns in kinds.items():
        docs = json.loads(ansible('ansible-doc', '-t', kind, '--json', *fqcns, collections_path=path).stdout)
        assert sorted(docs) == fqcns, kind
        for fqcn, doc in docs.items():
            if kind == 'role':
                assert doc['entry_points']['main']['short_description'], fqcn
                continue
            assert doc['doc']['filename'].startswith(collection), '%s documented from %s, not the install' % (
                fqcn, doc['doc']['filename'])
            assert doc['doc']['short_description'] and doc['doc'].get('options') is not None, fqcn
        text = ansible('ansible-doc', '-t', kind, *fqcns, collections_path=path)
        for fqcn in fqcns:
            assert re.search(r'^> %s:? \*?%s\*? \(' % (kind.upper(), re.escape(fqcn)), text.stdout, re.M), (
                'ansible-doc did not render %s' % fqcn)
        assert 'ERROR' not in text.stderr, text.stderr


def test_a_playbook_runs_by_fqcn_from_the_install(installed_collection, etcd1, tmp_path):
    """steward.cluster.etcd_backup against a real etcd member: the modules, module_utils and role come from
    the install, the etcd tools from the directory of the member's etcd binary."""
    path = installed_collection[0]
    member = next(iter(etcd1.members.values()))
    inventory = tmp_path / 'inventory.yml'
    inventory.write_text(yaml.safe_dump({'etcd': {'hosts': {'member1': {
        'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable,
        'etcd_client_url': member.client_url, 'etcd_peer_url': member.peer_url, 'etcd_binary': etcd1.etcd}}}}))
    store = tmp_path / 'backups'
    etcd1.put_many({'/galaxy/key-%d' % i: 'v%d' % i for i in range(20)})
    run = ansible('ansible-playbook', '-i', str(inventory), 'steward.cluster.etcd_backup',
                  '-e', 'etcd_backup_store=%s' % store, collections_path=path)
    assert re.search(r'member1\s*: ok=\d+\s+changed=[1-9]', run.stdout), run.stdout[-2000:]
    fulls = [n for n in os.listdir(store / 'v2') if n.startswith('Full-') and not n.endswith('.json')]
    assert len(fulls) == 1 and os.path.getsize(store / 'v2' / fulls[0]) > 0


# --- names users bring from kubernetes.core and amazon.aws -----------------------------------------------
# An option (or alias) for each of these, wherever a module has the concept.
KUBE_NAMES = ('kubeconfig', 'context', 'host', 'api_key', 'validate_certs', 'ca_cert')
S3_NAMES = ('access_key', 'secret_key', 'session_token', 'endpoint_url', 'region')
# Spellings of kubernetes.core/amazon.aws concepts that must not be an option's primary name.
NOT_PRIMARY = {'verify_ssl': 'validate_certs', 'ssl_ca_cert': 'ca_cert', 'kube_config': 'kubeconfig',
               'kubeconfig_path': 'kubeconfig', 'kube_context': 'context', 'timeout_wait': 'wait_timeout',
               'insecure': 'validate_certs', 'verify': 'validate_certs'}
# `verify` is a TLS switch only when it is a bool (etcd_snapshot_info's verify chooses how snapshots are checked).
TLS_ONLY_WHEN_BOOL = ('verify', 'insecure')
# Options naming a CA certificate file (ca_days, a CA's validity, is not one).
CA_FILE = re.compile(r'^ca_(path|file|bundle|crt|cert_file)$')
# Modules whose wait is bounded by something else than a wait_timeout option, and why.
WAIT_BOUNDED_ELSEWHERE = {
    'steward.cluster.watchdog_probe': "each level's wait is bounded by the prober config's per-target timeout (DWD's field)",
}


def test_option_names_follow_kubernetes_core_and_amazon_aws(installed_collection):
    path = installed_collection[0]
    modules = expected_plugins()['module']
    docs = json.loads(ansible('ansible-doc', '-t', 'module', '--json', *modules, collections_path=path).stdout)
    problems = []
    for fqcn, doc in sorted(docs.items()):
        options = doc['doc'].get('options') or {}
        names = {name: set([name] + list(option.get('aliases') or [])) for name, option in options.items()}
        known = set().union(*names.values()) if names else set()
        for name in options:
            if name in TLS_ONLY_WHEN_BOOL and options[name].get('type') != 'bool':
                continue
            if name in NOT_PRIMARY:
                problems.append('%s: option %s should be %s (keep %s as an alias)' % (fqcn, name, NOT_PRIMARY[name], name))
        if 'kubeconfig' in known:
            problems += ['%s: no %s option (kubernetes.core name)' % (fqcn, n) for n in KUBE_NAMES if n not in known]
        if 'store' in options:
            problems += ['%s: no %s option or alias (amazon.aws name)' % (fqcn, n) for n in S3_NAMES if n not in known]
        if 'wait' in options and 'wait_timeout' not in options and fqcn not in WAIT_BOUNDED_ELSEWHERE:
            problems.append('%s: has wait but no wait_timeout' % fqcn)
        for name in options:
            if CA_FILE.match(name) and 'ca_cert' not in known:
                problems.append('%s: CA option %s has no ca_cert alias' % (fqcn, name))
    assert not problems, '\n'.join(problems)


def test_module_defaults_reach_a_module_through_its_group(installed_collection, etcd1, tmp_path):
    """group/steward.cluster.etcd (meta/runtime.yml of the install) gives etcd_cluster_info its endpoints."""
    path = installed_collection[0]
    play = tmp_path / 'play.yml'
    play.write_text(yaml.safe_dump([{
        'name': 'module_defaults by action group', 'hosts': 'localhost', 'connection': 'local', 'gather_facts': False,
        'module_defaults': {'group/steward.cluster.etcd': {'endpoints': etcd1.endpoints, 'timeout': 10}},
        'tasks': [{'name': 'Ask the cluster', 'steward.cluster.etcd_cluster_info': {}, 'register': 'info'},
                  {'name': 'Check', 'ansible.builtin.assert': {
                      'that': ['info.has_quorum', 'info.endpoints | length == 1']}}]}]))
    run = ansible('ansible-playbook', '-i', 'localhost,', str(play), '-e', 'ansible_python_interpreter=%s' % sys.executable,
                  collections_path=path)
    assert re.search(r'localhost\s*: ok=2\s+changed=0\s+unreachable=0\s+failed=0', run.stdout), run.stdout[-2000:]


# --- the changelog -------------------------------------------------------------------------------------
def test_every_changelog_fragment_is_released_into_changelog_rst():
    subprocess.run([os.path.join(VENV_BIN, 'antsibull-changelog'), 'lint'], cwd=REPO, check=True, capture_output=True)
    changelog = yaml.safe_load(open(os.path.join(REPO, 'changelogs', 'changelog.yaml')))
    version = galaxy_meta()['version']
    assert version in changelog['releases'], 'changelogs/changelog.yaml has no release %s: run `make changelog`' % version
    released = {f for r in changelog['releases'].values() for f in r.get('fragments', [])}
    rst = open(os.path.join(REPO, 'CHANGELOG.rst')).read()
    fragments = sorted(os.listdir(os.path.join(REPO, 'changelogs', 'fragments')))
    assert fragments, 'changelogs/fragments is empty'
    for name in fragments:
        assert name in released, 'changelogs/fragments/%s is not in the changelog yet: run `make changelog`' % name
        for section, entries in yaml.safe_load(open(os.path.join(REPO, 'changelogs', 'fragments', name))).items():
            for entry in entries if isinstance(entries, list) else [entries]:
                assert entry.split()[0] in rst and entry.strip().splitlines()[0][:40] in rst, (name, section)
    areas = {entry.split(' - ', 1)[0] for f in fragments
             for entries in yaml.safe_load(open(os.path.join(REPO, 'changelogs', 'fragments', f))).values()
             if isinstance(entries, list) for entry in entries}
    assert {'etcd', 'sabakan', 'maintenance', 'controller'} <= areas, 'a release note per area: %s' % sorted(areas)
