"""Store directories that others may read are reported, not changed (the files and directories themselves are
made by common/files: tests/unit/plugins/module_utils/common/test_common_files.py)."""

from __future__ import annotations

import os

from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.private_files import wide_mode_notes


def test_wide_mode_notes_name_what_others_may_read(tmp_path):
    private = tmp_path / 'private'
    private.mkdir(mode=0o700)
    shared = tmp_path / 'shared'
    shared.mkdir()
    os.chmod(str(shared), 0o750)
    notes = wide_mode_notes([str(private), str(shared), str(tmp_path / 'missing')])
    assert [(n.path, n.mode, n.expected) for n in notes] == [(str(shared), '0750', '0700')]
    assert 'left as it is' in notes[0].message() and 'chmod 0700' in notes[0].message()
