"""Cluster and node options: defaults, and every bad input named by field and rule."""

from __future__ import annotations

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import parse_cluster, parse_node

from provisioning_fixtures import cluster, node


def test_defaults_follow_kubeadm():
    spec = cluster()
    assert spec.kubernetes_service_ip == '10.96.0.1'
    assert spec.cluster_dns_ip == '10.96.0.10'
    assert spec.image('kube-apiserver') == 'registry.k8s.io/kube-apiserver:v1.31.4'
    assert spec.peer_url('10.0.0.1') == 'https://10.0.0.1:2380'
    assert spec.peer_url('fd00::1') == 'https://[fd00::1]:2380'
    assert [m.name for m in spec.control_plane] == ['cp1', 'cp2', 'cp10']


@pytest.mark.parametrize('overrides, field, rule', [
    ({'control_plane': []}, 'control_plane', 'non-empty-list'),
    ({'control_plane': [{'name': 'CP1', 'address': '10.0.0.1'}]}, 'control_plane[0].name', 'dns-subdomain'),
    ({'control_plane': [{'name': 'cp1', 'address': '10.0.0.300'}]}, 'control_plane[0].address', 'ip-address'),
    ({'control_plane': [{'name': 'cp1', 'address': '10.0.0.1'}, {'name': 'cp1', 'address': '10.0.0.2'}]},
     'control_plane[1].name', 'unique'),
    ({'control_plane': [{'name': 'cp1', 'address': '10.0.0.1', 'port': 1}]}, 'control_plane[0].port', 'unknown-key'),
    ({'service_cidr': '10.96.0.1/12'}, 'service_cidr', 'cidr'),
    ({'pod_cidr': '10.96.0.0/16'}, 'pod_cidr', 'disjoint'),
    ({'kubernetes_version': '1.31'}, 'kubernetes_version', 'version'),
    ({'lb_port': 6443}, 'lb_port', 'unique'),
    ({'lb_port': 70000}, 'lb_port', 'maximum'),
    ({'cert_days': 400, 'ca_days': 100}, 'ca_days', 'minimum'),
    ({'renew_before_days': 365}, 'renew_before_days', 'maximum'),
    ({'key_algorithm': 'dsa'}, 'key_algorithm', 'choice'),
    ({'apiserver_extra_sans': ['api.example.com', 'Bad_Name']}, 'apiserver_extra_sans[1]', 'dns-subdomain'),
    ({'etcd_image': 'no spaces allowed'}, 'etcd_image', 'image'),
])
def test_bad_cluster_options_name_field_and_rule(overrides, field, rule):
    params = {'control_plane': [{'name': 'cp1', 'address': '10.0.0.1'}]}
    params.update(overrides)
    with pytest.raises(InvalidInput) as err:
        parse_cluster(params)
    assert (err.value.field, err.value.rule) == (field, rule)


@pytest.mark.parametrize('params, field, rule', [
    ({'node_name': 'w1', 'address': '10.0.1.1', 'role': 'control-plane'}, 'node_name', 'control-plane-member'),
    ({'node_name': 'cp1', 'address': '10.0.0.9', 'role': 'control-plane'}, 'address', 'control-plane-address'),
    ({'node_name': 'cp1', 'address': '10.0.0.1', 'role': 'worker'}, 'role', 'control-plane-member'),
    ({'node_name': 'w1', 'address': '10.0.1.1', 'role': 'master'}, 'role', 'choice'),
    ({'node_name': 'w1', 'address': '10.0.1.1', 'local_address': '10.0.1.1'}, 'local_address', 'loopback'),
    ({'node_name': 'w1', 'address': '10.0.1.1', 'labels': {'a': 'has space'}}, 'labels.a', 'label-value'),
    ({'node_name': 'w1', 'address': '10.0.1.1', 'labels': {'a': None}}, 'labels.a', 'label-value'),
])
def test_bad_node_options(params, field, rule):
    with pytest.raises(InvalidInput) as err:
        parse_node(params, cluster())
    assert (err.value.field, err.value.rule) == (field, rule)


def test_node_labels_are_sorted_pairs_and_numbers_become_strings():
    spec = node(cluster(), 'w1', 'worker', labels={'zone': 'a', 'rack': 3})
    assert spec.labels == (('rack', '3'), ('zone', 'a'))
    assert not spec.control_plane
