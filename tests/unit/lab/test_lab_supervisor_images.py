"""The static-pod supervisor (the lab's kubelet stand-in) runs the binary of the minor an image tag names, so an
upgrade by image tag runs the real binary of that version."""

from lab.provisioning.supervisor import image_binary, image_minor, pod_command

BINARIES = {'etcd': '/wheel/etcd', 'etcd:3.4': '/usr/bin/etcd', 'etcd:3.5': '/wheel/etcd',
            'haproxy': '/usr/sbin/haproxy'}


def test_the_tag_minor_picks_the_binary():
    assert image_minor('registry.k8s.io/etcd:3.4.23-0') == '3.4'
    assert image_minor('quay.io/coreos/etcd:v3.5.1') == '3.5'
    assert image_minor('localhost:5000/etcd:3.5.16-0@sha256:ab') == '3.5'
    assert image_minor('registry.k8s.io/etcd') is None and image_minor('haproxy:lts') is None
    assert image_binary('registry.k8s.io/etcd:3.4.23-0', BINARIES) == '/usr/bin/etcd'
    assert image_binary('registry.k8s.io/etcd:3.5.16-0', BINARIES) == '/wheel/etcd'
    # a minor this machine has no binary of runs the name's default (what the supervisor did before tags counted)
    assert image_binary('registry.k8s.io/etcd:3.6.0-0', BINARIES) == '/wheel/etcd'
    assert image_binary('docker.io/library/haproxy:2.6', BINARIES) == '/usr/sbin/haproxy'
    assert image_binary('registry.k8s.io/kube-apiserver:v1.30.0', BINARIES) is None


def test_pod_command_runs_the_tag_binary(tmp_path):
    binary = tmp_path / 'etcd34'
    binary.write_text('')
    pod = {'spec': {'containers': [{'name': 'etcd', 'image': 'registry.k8s.io/etcd:3.4.23-0',
                                    'command': ['etcd', '--data-dir=/var/lib/etcd'],
                                    'volumeMounts': [{'name': 'data', 'mountPath': '/var/lib/etcd'}]}],
                    'volumes': [{'name': 'data', 'hostPath': {'path': '/var/lib/etcd'}}]}}
    argv = pod_command(pod, str(tmp_path / 'root'), dict(BINARIES, **{'etcd:3.4': str(binary)}))
    assert argv == [str(binary), '--data-dir=%s' % (tmp_path / 'root' / 'var' / 'lib' / 'etcd')]
