# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kopf settings the operator's startup applies: a timer whose object is deleted mid-tick must not hold the
object Terminating for kopf's default minute (the EtcdOperatorTask loop deletes a finished task from its own tick,
and its ttlSecondsAfterFinished is a promise in seconds)."""

from __future__ import annotations

import types

import kopf

from steward_controller.core import operator
from steward_controller.etcd_tasks import operator_task


def _startup_settings() -> kopf.OperatorSettings:
    runtime = types.SimpleNamespace(settings=types.SimpleNamespace(enabled=lambda name: False, controllers=(),
                                                                   kubeconfig=''))
    registry = operator.build_registry(runtime)
    settings = kopf.OperatorSettings()
    handlers = [h for h in registry._activities.get_all_handlers()  # pylint: disable=protected-access
                if str(getattr(h.activity, 'value', h.activity)) == 'startup']
    assert handlers, 'the operator registers a startup handler that configures kopf'
    for handler in handlers:
        handler.fn(settings=settings)
    return settings


def test_a_deleted_objects_timer_is_checked_again_within_a_tick_interval():
    settings = _startup_settings()
    assert kopf.OperatorSettings().background.cancellation_polling == 60, "kopf's default, the hazard"
    assert settings.background.cancellation_polling <= operator_task.INTERVAL


def test_status_stays_ours_and_kopf_posts_no_events():
    settings = _startup_settings()
    assert settings.posting.enabled is False
    assert settings.persistence.finalizer.startswith('cluster.steward.io')
