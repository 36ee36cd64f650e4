"""PKI: issuing, describing and the keep/issue/renew decision (cryptography, fixed clock)."""

from __future__ import annotations

import datetime

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.provisioning import pki
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import PkiError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.pki import KeyPair, Subject

from provisioning_fixtures import NOW, authority

SERVER = Subject('etcd-0', (), ('etcd-0', 'localhost'), ('10.0.0.1', '127.0.0.1'), (pki.SERVER, pki.CLIENT))


@pytest.fixture(scope='module')
def ca():
    return authority().ca('etcd/ca')


@pytest.fixture(scope='module')
def leaf(ca):
    return pki.issue(SERVER, ca, 'ecdsa-p256', NOW, 365)


def test_issue_describes_subject_sans_usages_and_validity(ca, leaf):
    info = pki.describe(leaf.cert_pem, NOW)
    assert info['common_name'] == 'etcd-0'
    assert info['dns_names'] == ['etcd-0', 'localhost']
    assert info['ip_addresses'] == ['10.0.0.1', '127.0.0.1']
    assert info['usages'] == ['client', 'server']
    assert info['issuer'] == 'CN=etcd-ca'
    assert info['days_left'] == 365
    assert info['is_ca'] is False and info['expired'] is False
    assert pki.verify_chain(leaf.cert_pem, ca.cert_pem)


def test_leaf_never_outlives_its_ca():
    short_ca = pki.new_ca('short', 'ecdsa-p256', NOW, 10)
    leaf = pki.issue(Subject('x'), short_ca, 'ecdsa-p256', NOW, 365)
    assert pki.describe(leaf.cert_pem, NOW)['not_after'] == pki.describe(short_ca.cert_pem, NOW)['not_after']


@pytest.mark.parametrize('change, action, reason', [
    (lambda s: s, 'keep', 'valid until'),
    (lambda s: Subject('etcd-1', s.organizations, s.dns_names, s.ip_addresses, s.usages), 'issue', 'subject changed'),
    (lambda s: Subject(s.common_name, (), s.dns_names, s.ip_addresses + ('10.0.0.9',), s.usages), 'issue',
     'SANs changed (+10.0.0.9)'),
    (lambda s: Subject(s.common_name, (), s.dns_names, s.ip_addresses, (pki.SERVER,)), 'issue', 'usages changed'),
    (lambda s: Subject(s.common_name, ('system:masters',), s.dns_names, s.ip_addresses, s.usages), 'issue',
     'subject changed'),
], ids=['same', 'cn', 'san', 'usage', 'organization'])
def test_check_keeps_only_a_matching_certificate(ca, leaf, change, action, reason):
    decision = pki.check(leaf, change(SERVER), ca, NOW, 30)
    assert decision.action == action
    assert reason in decision.reason


@pytest.mark.parametrize('days_later, action', [(300, 'keep'), (334, 'keep'), (335, 'renew'), (400, 'renew')])
def test_check_renews_within_renew_before_days(ca, leaf, days_later, action):
    decision = pki.check(leaf, SERVER, ca, NOW + datetime.timedelta(days=days_later), 30)
    assert decision.action == action, decision.reason


def test_check_issues_for_missing_foreign_or_mismatched_material(ca, leaf):
    assert pki.check(None, SERVER, ca, NOW, 30).reason == 'missing'
    other_ca = authority('other').ca('etcd/ca')
    foreign = pki.issue(SERVER, other_ca, 'ecdsa-p256', NOW, 365)
    assert 'not signed by the current CA' in pki.check(foreign, SERVER, ca, NOW, 30).reason
    swapped = KeyPair(leaf.cert_pem, foreign.key_pem)
    assert pki.check(swapped, SERVER, ca, NOW, 30).reason == 'the key does not match the certificate'
    assert pki.check(KeyPair(b'garbage', leaf.key_pem), SERVER, ca, NOW, 30).reason.startswith('unreadable')


def test_ca_is_kept_unless_renewal_is_asked_and_then_keeps_its_key(ca, leaf):
    late = NOW + datetime.timedelta(days=3640)
    kept = pki.check_ca(ca, late, 30, renew=False)
    assert kept.action == 'keep' and 'CA renewal not asked' in kept.reason
    assert pki.check_ca(ca, late, 30, renew=True).action == 'renew'
    renewed = pki.renew_ca(ca, late, 3650)
    assert renewed.key_pem == ca.key_pem
    assert pki.describe(renewed.cert_pem, late)['days_left'] == 3650
    # what the old CA signed verifies against the renewed one: same subject and key
    assert pki.verify_chain(leaf.cert_pem, renewed.cert_pem)


def test_rsa_keys_and_bad_pem():
    ca = pki.new_ca('rsa-ca', 'rsa-2048', NOW, 10)
    leaf = pki.issue(Subject('c'), ca, 'rsa-2048', NOW, 5)
    assert pki.check(leaf, Subject('c'), ca, NOW, 1).action == 'keep'
    with pytest.raises(PkiError, match='not a PEM certificate'):
        pki.load_cert(b'nope', 'x.crt')


def test_split_pem_reads_the_kubelet_combined_file(leaf):
    cert, key = pki.split_pem(leaf.cert_pem + leaf.key_pem)
    assert (cert, key) == (leaf.cert_pem, leaf.key_pem)
    assert pki.split_pem(b'') == (b'', b'')
