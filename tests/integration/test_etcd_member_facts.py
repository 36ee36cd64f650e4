"""etcd_member_facts against a real member: the result is also the host fact `etcd_member`."""

from __future__ import annotations

from support.ansible import local_play, run_playbook


def test_member_facts_set_the_etcd_member_fact(etcd1):
    member = next(iter(etcd1.members.values()))
    result = run_playbook(local_play([
        {'name': 'Inspect', 'steward.cluster.etcd_member_facts': {
            'name': member.name, 'data_dir': member.data_dir, 'client_url': member.client_url,
            'peer_url': member.peer_url, 'endpoints': [member.client_url]}, 'register': 'inspected'},
        {'name': 'Read the fact', 'ansible.builtin.set_fact': {
            'seen': "{{ hostvars['localhost'].etcd_member }}", 'same': '{{ etcd_member == inspected.member }}'}},
    ]))
    assert result.rc == 0, result.stderr[-2000:]
    facts = result.result('Inspect')['ansible_facts']['etcd_member']
    assert facts['responding'] and facts['healthy'] and facts['data_has_data'] and facts['name'] == member.name
    read = result.result('Read the fact')['ansible_facts']
    assert read['seen']['member_id'] == facts['member_id'] and read['same'] in (True, 'True')
