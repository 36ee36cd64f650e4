# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""steward.cluster.etcd_recovery_plan on the controller: the plan is a pure function of the facts the etcd hosts
reported (recovery.plan_recovery contacts nothing), so it is computed here instead of shipping the module to a host
and starting a Python there, which cost more than the decision (recovery speed, issue 17). Same options, same
checks (bad input fails naming the field and the rule, changed=False), same result as the module."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

from ansible.plugins.action import ActionBase

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.shell import failure_result
from ansible_collections.steward.cluster.plugins.module_utils.etcd.args import RECOVERY_PLAN_SPEC
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.recovery import plan_recovery


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(RECOVERY_PLAN_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=RECOVERY_PLAN_SPEC)
        # plain data (no templating tags): the planner checks it like an API object
        hosts = json.loads(json.dumps(args['hosts']))
        try:
            plan = plan_recovery(hosts, store_configured=bool(args['store_configured']))
        except InvalidInput as exc:
            result.update(failure_result(exc), failed=True)
            return result
        result.update(changed=False, plan=plan.to_dict(), msg='; '.join(plan.reasons))
        return result
