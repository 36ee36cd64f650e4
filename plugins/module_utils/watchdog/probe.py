# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One probe of a cluster, as DWD runs it (internal/prober/prober.go): the API server first (`GET /version`,
DWD's discovery ServerVersion), then the Nodes and the node Leases in `kube-node-lease`, listed together (and Machines in the
watchdog's namespace, when that resource exists), then the verdict (leases.evaluate_leases).

An API server that does not answer, or a list that fails, ends the probe without a verdict (ProbeError):
nothing is scaled on missing evidence. HTTP 429 marks the error `throttled`, after which the caller waits
`backoffDurationForThrottledRequests` before the next probe.

The probed cluster is reached with a fresh client per probe, as DWD does since its issue #61 (a connection
kept alive across a network failure must not make an outage look like a healthy API server or the reverse):
the caller's own cluster, or the kubeconfig in the Secret `kubeConfigSecretName` (key `kubeconfig`).

The sequence the prober loop and the watchdog_probe module share: `cluster_stopped` (is probing on for the
cluster, from the watchdog's namespace), then `probe_now` (client, probe, close; no Nodes means stopped too).
"""

from __future__ import annotations

import contextvars
import dataclasses
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import HAS_KUBERNETES, KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError, NotFound
from ansible_collections.steward.cluster.plugins.module_utils.kube.secrets import secret_text
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import constants as c
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import leases
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.decision import stopped_reason
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.errors import ProbeError
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import ProberConfig

if HAS_KUBERNETES:
    import kubernetes

API = 'api'          # ProbeError.stage: the API server did not answer
NODES = 'nodes'      # listing Nodes failed
LEASES = 'leases'    # listing node Leases failed
MACHINES = 'machines'
SECRET = 'secret'    # the kubeconfig Secret could not be read or used

NODES_PATH = api_path('v1', 'nodes')
LEASES_PATH = api_path('coordination.k8s.io/v1', 'leases', c.NODE_LEASE_NAMESPACE)
MACHINE_API_VERSION = 'machine.sapcloud.io/v1alpha1'


@dataclasses.dataclass
class ProbeOutcome:
    started: float
    finished: float
    verdict: Optional[leases.LeaseVerdict] = None
    error: Optional[ProbeError] = None
    nodes: int = 0          # Nodes in the probed cluster (0: no workers)

    @property
    def result(self) -> str:
        """healthy, failed, skipped, or the stage that failed (`api`, `nodes`, `leases`, ...)."""
        if self.error is not None:
            return self.error.stage
        return self.verdict.verdict if self.verdict is not None else 'none'

    def as_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {'result': self.result, 'nodes': self.nodes,
                               'seconds': round(self.finished - self.started, 3)}
        if self.verdict is not None:
            out.update(self.verdict.as_dict())
        if self.error is not None:
            out['error'] = str(self.error)
        return out


def _probe_error(stage: str, what: str, exc: KubeError) -> ProbeError:
    return ProbeError('%s: %s' % (what, exc), stage, throttled=exc.status == 429)


def list_items(client: KubeClient, path: str) -> List[Dict[str, Any]]:
    return (client.request('GET', path) or {}).get('items') or []


class _Background:
    """One call on its own thread, in the caller's context (a deadline watch the caller set covers it too);
    `result` returns its value or raises its exception. The client's own deadline bounds the call, so waiting
    for it is bounded too."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self._call = call
        self._value: Any = None
        self._error: Optional[BaseException] = None
        context = contextvars.copy_context()
        self._thread = threading.Thread(target=context.run, args=(self._run,), name='probe-list', daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._call()
        except BaseException as exc:  # pylint: disable=broad-except  # handed to the caller as is
            self._error = exc

    def join(self) -> None:
        self._thread.join()

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def probe_cluster(probed: KubeClient, config: ProberConfig, clock: Callable[[], float] = time.time,
                  machines: Optional[Callable[[], List[Dict[str, Any]]]] = None) -> ProbeOutcome:
    """API probe, lists, verdict. `machines` lists the Machines of the watchdog's namespace (None: no MCM)."""
    outcome = ProbeOutcome(started=clock(), finished=0.0)
    try:
        try:
            probed.request('GET', '/version')
        except KubeError as exc:
            raise _probe_error(API, 'API server probe failed; no lease probe, no scaling', exc) from None
        # the two lists go out together (the Leases on a second thread): at 5,000 nodes each is a transfer of
        # megabytes, and the probe's time is what stands between a crossing and the decision. Errors are reported
        # as one after the other would: a failed Node list first.
        leases_call = _Background(lambda: list_items(probed, LEASES_PATH))
        try:
            nodes = list_items(probed, NODES_PATH)
        except KubeError as exc:
            leases_call.join()
            raise _probe_error(NODES, 'listing Nodes failed; no scaling', exc) from None
        try:
            node_leases = leases_call.result()
        except KubeError as exc:
            raise _probe_error(LEASES, 'listing node Leases in %s failed; no scaling' % c.NODE_LEASE_NAMESPACE, exc) from None
        try:
            machine_list = machines() if machines is not None else []
        except KubeError as exc:
            raise _probe_error(MACHINES, 'listing Machines failed; no scaling', exc) from None
    except ProbeError as exc:
        outcome.error = exc
        outcome.finished = clock()
        return outcome
    outcome.nodes = len(nodes)
    names, excluded = leases.candidate_nodes(nodes, machine_list)
    now = clock()
    outcome.verdict = leases.evaluate_leases(node_leases, names, now, config.lease_expiry_seconds,
                                             config.node_lease_failure_fraction, excluded)
    outcome.finished = clock()
    return outcome


def machine_lister(seed: KubeClient, namespace: str) -> Callable[[], List[Dict[str, Any]]]:
    """Lists MCM Machines in the watchdog's namespace; a cluster without the Machine resource has none."""
    path = api_path(MACHINE_API_VERSION, 'machines', namespace)

    def machines() -> List[Dict[str, Any]]:
        try:
            return list_items(seed, path)
        except NotFound:
            return []
    return machines


def probed_client(seed: KubeClient, config: ProberConfig, namespace: str) -> KubeClient:
    """A fresh client for the probed cluster, bounded by probeTimeout: the seed's own cluster, or the kubeconfig
    in Secret `kubeConfigSecretName` of `namespace` (key `kubeconfig`). Raises ProbeError(stage='secret')."""
    if not config.kube_config_secret_name:
        return KubeClient(seed.configuration, timeout=config.probe_timeout)
    name = config.kube_config_secret_name
    try:
        secret = seed.get(api_path('v1', 'secrets', namespace, name))
    except KubeError as exc:
        raise _probe_error(SECRET, 'cannot read Secret %s/%s (kubeConfigSecretName)' % (namespace, name), exc) from None
    if not ((secret.get('data') or {}).get(c.KUBECONFIG_SECRET_KEY) or (secret.get('stringData') or {}).get(c.KUBECONFIG_SECRET_KEY)):
        raise ProbeError('Secret %s/%s has no key %r (kubeConfigSecretName)' % (namespace, name, c.KUBECONFIG_SECRET_KEY),
                         SECRET)
    try:
        import yaml
        data = yaml.safe_load(secret_text(secret, c.KUBECONFIG_SECRET_KEY, 'kubeConfigSecretName') or '')
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config_from_dict(data, client_configuration=configuration)
    except Exception as exc:  # a broken kubeconfig: yaml, base64 (InvalidInput) or kubernetes.config errors alike
        raise ProbeError('Secret %s/%s key %r is not a usable kubeconfig: %s' % (
            namespace, name, c.KUBECONFIG_SECRET_KEY, exc.__class__.__name__), SECRET) from None
    return KubeClient(configuration, timeout=config.probe_timeout)


def _cluster_stopped(seed: KubeClient, namespace: str) -> str:
    """Why probing is off for the cluster by its namespace ('' when on): deleting, hibernated, migrating
    (decision.stopped_reason). A namespace that cannot be read stops nothing."""
    try:
        ns = seed.get_or_none(api_path('v1', 'namespaces', name=namespace))
    except KubeError:
        ns = None
    return stopped_reason(ns)


def _probe_now(seed: KubeClient, config: ProberConfig, namespace: str,
               clock: Callable[[], float] = time.time) -> Tuple[ProbeOutcome, str]:
    """One probe with a fresh client (closed after), and why probing is off when the probe found no Nodes ('' else).
    A client that cannot be made (the kubeconfig Secret) is an outcome with its ProbeError, as a failed probe is."""
    try:
        probed = probed_client(seed, config, namespace)
    except ProbeError as exc:
        now = clock()
        return ProbeOutcome(started=now, finished=now, error=exc), ''
    try:
        outcome = probe_cluster(probed, config, clock, machines=machine_lister(seed, namespace))
    finally:
        probed.close()
    return outcome, (stopped_reason(None, 0) if outcome.error is None and outcome.nodes == 0 else '')


def probe_sequence(seed: KubeClient, config: ProberConfig, namespace: str, clock: Callable[[], float] = time.time, *,
                   always: bool = False, namespace_only: bool = False) -> Tuple[Optional[ProbeOutcome], str]:
    """The probe sequence of the prober loop and the watchdog_probe module, in one place: is probing off for the
    cluster by its namespace (deleting, hibernated, migrating); unless it is, one probe with a fresh client (the
    kubeconfig Secret's), closed after; a probe that finds no Nodes turns probing off too.

    Returns (the outcome, or None when no probe ran; why probing is off, '' when on).
    `always`: probe even when the namespace says off (the module reports the probe it was asked for; the reason
    still decides that nothing is done). `namespace_only`: look at the namespace and do not probe (the loop,
    coming back from off, waits initialDelay before its first probe)."""
    off = _cluster_stopped(seed, namespace)
    if namespace_only or (off and not always):
        return None, off
    outcome, empty = _probe_now(seed, config, namespace, clock)
    return outcome, off or empty
