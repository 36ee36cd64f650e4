# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names and numbers of the dependency watchdog: DWD's own (annotation keys, config defaults, the lease
expiry buffer) exactly as gardener/dependency-watchdog v1.x has them, and the few this collection adds
(the ownership marker and the hysteresis defaults that keep DWD's behaviour)."""

from __future__ import annotations

# --- DWD's annotations on a dependent resource (api/prober/types.go, internal/prober/scaler/scale.go) -----------
REPLICAS_ANNOTATION = 'dependency-watchdog.gardener.cloud/replicas'
IGNORE_SCALING_ANNOTATION = 'dependency-watchdog.gardener.cloud/ignore-scaling'
MELTDOWN_ANNOTATION = 'dependency-watchdog.gardener.cloud/meltdown-protection-active'

# --- ours: who scaled the target and how far that went (docs/watchdog.md "Ownership") -----------------------------
OWNER_ANNOTATION = 'cluster.steward.io/watchdog-owner'
STATE_ANNOTATION = 'cluster.steward.io/watchdog-state'
# The states a target scaled by us goes through. Two-step writes (intent, then the scale call, then the result)
# let a restarted watchdog tell "my step was interrupted" from "someone else changed the replicas".
SCALING_DOWN = 'scaling-down'   # replicas recorded, scale to 0 not yet confirmed
SCALED_DOWN = 'scaled-down'     # at 0 by us; the replicas annotation says what to restore
SCALING_UP = 'scaling-up'       # the scale-up is decided; restore not yet confirmed
RELEASED = 'released'           # someone else changed the replicas while it was down: left alone until healthy
STATES = (SCALING_DOWN, SCALED_DOWN, SCALING_UP, RELEASED)
DOWN_STATES = (SCALING_DOWN, SCALED_DOWN)

# DWD stops a cluster's probe when its Cluster object is deleted, hibernated or migrating (DWD-P-01). Here the
# cluster is represented by the watchdog's namespace: these annotations on it (value "true") stop probing.
HIBERNATED_ANNOTATION = 'cluster.steward.io/hibernated'
MIGRATING_ANNOTATION = 'cluster.steward.io/migrating'

# --- prober config defaults (internal/prober/config.go) ----------------------------------------------------------
DEFAULT_PROBE_INTERVAL = 10.0
DEFAULT_PROBE_INITIAL_DELAY = 30.0
DEFAULT_PROBE_TIMEOUT = 30.0
DEFAULT_BACKOFF_JITTER_FACTOR = 0.2
DEFAULT_NODE_LEASE_FAILURE_FRACTION = 0.6
DEFAULT_KCM_NODE_MONITOR_GRACE_DURATION = 40.0
DEFAULT_SCALE_INITIAL_DELAY = 0.0
DEFAULT_SCALE_TIMEOUT = 30.0
# internal/prober/prober.go: a lease counts as expired 0.75 x the KCM grace period after its last renewal.
EXPIRY_BUFFER_FRACTION = 0.75
# prober.go's backOffDurationForThrottledRequests (a constant there; a config field here).
DEFAULT_THROTTLED_BACKOFF = 10.0
# scale.go: what a scale-up restores without a usable replicas annotation (a scale-down goes to 0).
DEFAULT_SCALE_UP_REPLICAS = 1
# Ours: consecutive failed / successful lease probes before acting. 1 and 1 act on every probe, as DWD does.
DEFAULT_FAILURE_THRESHOLD = 1
DEFAULT_SUCCESS_THRESHOLD = 1

NODE_LEASE_NAMESPACE = 'kube-node-lease'
# A Secret named by kubeConfigSecretName holds the probed cluster's kubeconfig under this key (internal/util).
KUBECONFIG_SECRET_KEY = 'kubeconfig'

# --- node filters of the candidate leases (internal/util/node.go) ------------------------------------------------
NOT_MANAGED_BY_MCM_ANNOTATION = 'node.machine.sapcloud.io/not-managed-by-mcm'
DEFAULT_UNHEALTHY_NODE_CONDITIONS = ('KernelDeadlock', 'ReadonlyFilesystem', 'DiskPressure', 'NetworkUnavailable')
MACHINE_NODE_LABEL = 'node'
MACHINE_GONE_PHASES = ('Failed', 'Terminating')

# --- weeder config defaults (internal/weeder/config.go) and ours ------------------------------------------------
DEFAULT_WATCH_DURATION = 300.0
CRASH_LOOP_BACK_OFF = 'CrashLoopBackOff'
SERVICE_NAME_LABEL = 'kubernetes.io/service-name'   # EndpointSlice -> its Service
DEFAULT_MAX_DELETIONS_PER_POD = 3
DEFAULT_DELETION_WINDOW = 600.0
