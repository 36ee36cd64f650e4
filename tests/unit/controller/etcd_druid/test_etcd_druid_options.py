"""The `etcd` loop's flags: druid's names and defaults, the deprecated alias, refusals naming the flag; and the loop is
selectable with `--controllers etcd`."""

import argparse

import pytest

from steward_controller.core import settings
from steward_controller.etcd_druid import DruidOptions, add_arguments, options


def parsed(*argv):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return options(parser.parse_args(list(argv)))


def test_druids_defaults():
    assert parsed() == DruidOptions(status_sync_period=15.0, unknown_threshold=60.0, notready_threshold=300.0,
                                    auto_reconcile=False, backup_max_age=3600.0, max_unready_deletions=1,
                                    update_snapshot_timeout=600.0, member_removal_timeout=300.0)


def test_durations_and_switches():
    opts = parsed('--etcd-status-sync-period', '5s', '--etcd-member-unknown-threshold', '30s',
                  '--etcd-member-notready-threshold', '2m', '--enable-etcd-spec-auto-reconcile')
    assert (opts.status_sync_period, opts.unknown_threshold, opts.notready_threshold, opts.auto_reconcile) == \
        (5.0, 30.0, 120.0, True)


def test_deprecated_alias_turns_auto_reconcile_on():
    assert parsed('--ignore-operation-annotation').auto_reconcile is True


@pytest.mark.parametrize('argv, flag', [
    (('--etcd-status-sync-period', '0s'), '--etcd-status-sync-period'),
    (('--etcd-member-unknown-threshold', 'soon'), '--etcd-member-unknown-threshold'),
    (('--etcd-max-unready-deletions', '-1'), '--etcd-max-unready-deletions'),
    (('--etcd-update-snapshot-timeout', '0s'), '--etcd-update-snapshot-timeout'),
    (('--etcd-member-removal-timeout', '0s'), '--etcd-member-removal-timeout'),
])
def test_bad_values_name_the_flag(argv, flag):
    with pytest.raises(ValueError, match=flag):
        parsed(*argv)


def test_environment_sets_the_default(monkeypatch):
    monkeypatch.setenv('STEWARD_ETCD_STATUS_SYNC_PERIOD', '20s')
    assert parsed().status_sync_period == 20.0


def test_selected_by_controllers_etcd():
    parsed_settings = settings.parse(['--controllers', 'etcd', '--etcd-status-sync-period', '3s'])
    assert parsed_settings.controllers == ('etcd',) and parsed_settings.enabled('etcd')
    assert parsed_settings.options('etcd').status_sync_period == 3.0
