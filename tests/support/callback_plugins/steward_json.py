# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-only stdout callback: the whole run as one JSON document, in ansible.posix.json's shape.

ansible-core redirects `ansible.builtin.json` to `ansible.posix.json`, which is not installed here
(no Galaxy access); tests/support/ansible.py reads this shape: {plays: [{play, tasks: [{task, hosts}]}], stats}.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r'''
name: steward_json
type: stdout
short_description: one JSON document per playbook run (tests only)
description: Prints plays, per-task per-host results and stats as JSON when the playbook ends.
'''


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'stdout'
    CALLBACK_NAME = 'steward_json'

    def __init__(self, display=None):
        super(CallbackModule, self).__init__(display)
        self.results = []

    def v2_playbook_on_play_start(self, play):
        self.results.append({'play': {'name': play.get_name(), 'id': str(play._uuid)}, 'tasks': []})

    def _task_start(self, task):
        self.results[-1]['tasks'].append({'task': {'name': task.get_name(), 'id': str(task._uuid)}, 'hosts': {}})

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._task_start(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._task_start(task)

    def _record(self, result, **extra):
        host = result._host.get_name()
        data = dict(result._result)
        data.update(extra)
        data['action'] = result._task.action
        self.results[-1]['tasks'][-1]['hosts'][host] = data

    def v2_runner_on_ok(self, result, **kwargs):
        self._record(result)

    def v2_runner_on_failed(self, result, ignore_errors=False, **kwargs):
        self._record(result, failed=True)

    def v2_runner_on_unreachable(self, result, **kwargs):
        self._record(result, unreachable=True)

    def v2_runner_on_skipped(self, result, **kwargs):
        self._record(result, skipped=True)

    def v2_playbook_on_stats(self, stats):
        summary = dict((h, stats.summarize(h)) for h in sorted(stats.processed.keys()))
        self._display.display(json.dumps({'plays': self.results, 'stats': summary}, indent=2, sort_keys=True,
                                         default=str))
