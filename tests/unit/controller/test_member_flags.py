# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""steward-etcd-member takes the `etcdbrctl server` arguments druid's StatefulSet passes, unchanged."""

from __future__ import annotations

import pytest

from steward_controller.member import main

DRUID_ARGS = ['server', '--data-dir=/var/etcd/data/new.etcd', '--server-port=8080', '--etcd-connection-timeout=5m',
              '--snapstore-temp-directory=/var/etcd/data/temp', '--garbage-collection-policy=Exponential',
              '--garbage-collection-period=43200s', '--delta-snapshot-period=300s',
              '--delta-snapshot-memory-limit=1073741824', '--schedule=0 */24 * * *',
              '--defragmentation-schedule=0 0 * * *', '--etcd-snapshot-timeout=900s', '--etcd-defrag-timeout=900s',
              '--embedded-etcd-quota-bytes=8589934592', '--auto-compaction-mode=periodic',
              '--auto-compaction-retention=30m', '--enable-member-lease-renewal=true', '--enable-snapshot-lease-renewal',
              '--k8s-heartbeat-duration=10s', '--full-snapshot-lease-name=etcd-main-full-snap',
              '--delta-snapshot-lease-name=etcd-main-delta-snap', '--service-endpoints=http://etcd-main-client:2379',
              '--storage-provider=aws', '--store-prefix=etcd-main', '--store-container=bucket', '--max-backups=7',
              '--compress-snapshots=true', '--compression-policy=gzip']


def test_druids_arguments_parse_into_the_backup_loops_policy():
    args = main.parser().parse_args(DRUID_ARGS)
    assert args.enable_member_lease_renewal is True and args.enable_snapshot_lease_renewal is True
    assert args.endpoints == 'http://etcd-main-client:2379' and args.work_dir == '/var/etcd/data/temp'
    policy = main.backup_policy(args)
    assert (policy.delta_period, policy.gc_policy, policy.gc_period, policy.max_backups, policy.compression,
            policy.snapshot_timeout) == (300.0, 'Exponential', 43200.0, 7, 'gzip', 900.0)
    assert policy.full_schedule.expr == '0 */24 * * *'
    assert main.store_url(args.storage_provider, args.store_container, args.store_prefix) == 's3://bucket/etcd-main'


@pytest.mark.parametrize('argv,words', [(['--enable-member-lease-renewal=maybe'], 'expected true or false'),
                                        (['--compression-policy=lzw'], 'invalid choice'),
                                        (['restore'], 'invalid choice')])
def test_bad_flags_are_refused_naming_them(argv, words, capsys):
    with pytest.raises(SystemExit):
        main.parser().parse_args(argv)
    assert words in capsys.readouterr().err


def test_a_bad_store_names_the_flags():
    with pytest.raises(SystemExit, match='--storage-provider'):
        main.store_url('gcp', 'bucket', 'p')


def test_rolling_restart_flags_default_on_and_turn_off_as_etcdbrctl_booleans():
    args = main.parser().parse_args(['server'])
    assert (args.leader_handoff, args.readiness_catch_up, args.readiness_max_lag, args.leader_handoff_timeout) == (
        True, True, 100, '10s')
    args = main.parser().parse_args(['server', '--leader-handoff=false', '--readiness-catch-up=false',
                                     '--readiness-max-lag', '5'])
    assert (args.leader_handoff, args.readiness_catch_up, args.readiness_max_lag) == (False, False, 5)


def test_client_tls_flags_as_druid_passes_them_reach_the_connection(tmp_path, capsys):
    args = main.parser().parse_args(DRUID_ARGS + ['--insecure-transport=false', '--insecure-skip-tls-verify=false',
                                                  '--cacert=/ssl/ca/ca.crt', '--cert=/ssl/client/tls.crt',
                                                  '--key=/ssl/client/tls.key'])
    assert (args.cacert, args.cert, args.key) == ('/ssl/ca/ca.crt', '/ssl/client/tls.crt', '/ssl/client/tls.key')
    assert args.insecure_transport is False and args.insecure_skip_tls_verify is False
    config = tmp_path / 'etcd.conf.yaml'
    config.write_text('name: etcd-main-0\ninitial-cluster: etcd-main-0=https://127.0.0.1:2380\n')
    for extra, words in ((['--cert=/c.crt'], '--cert and --key: give both or neither'),
                         (['--insecure-skip-tls-verify=true'], '--insecure-skip-tls-verify=true: refused')):
        assert main.main(['--config-file', str(config), '--name', 'etcd-main-0'] + extra) == 2
        assert words in capsys.readouterr().err
