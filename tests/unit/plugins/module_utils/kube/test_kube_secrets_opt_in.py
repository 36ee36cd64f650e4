"""A Secret is used on a custom resource's behalf only with its owner's opt-in label (issue 19 §5)."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.secrets import opted_in, require_opt_in

LABEL = 'cluster.steward.io/usable-by-controller'


def secret(labels):
    return {'metadata': {'name': 's3', 'namespace': 'team-a', 'labels': labels}, 'data': {'password': 'c2VjcmV0'}}


@pytest.mark.parametrize('labels, ok', [
    ({LABEL: 'true'}, True), ({LABEL: 'false'}, False), ({LABEL: 'yes'}, False), ({}, False), (None, False),
])
def test_only_the_label_set_to_true_opts_in(labels, ok):
    assert opted_in(secret(labels)) is ok


def test_refusal_names_the_field_the_secret_and_the_fix_never_the_value():
    with pytest.raises(InvalidInput) as caught:
        require_opt_in(secret({}), 'spec.store.secretRef')
    assert (caught.value.field, caught.value.rule) == ('spec.store.secretRef', 'secret-opt-in')
    assert 'team-a/s3' in str(caught.value) and 'kubectl label secret -n team-a s3 %s=true' % LABEL in str(caught.value)
    assert 'c2VjcmV0' not in str(caught.value) and 'secret' != caught.value.value


def test_the_check_can_be_turned_off():
    require_opt_in(secret({}), 'spec.store.secretRef', required=False)
