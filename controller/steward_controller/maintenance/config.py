# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where node maintenance reads its maintenance.yaml, and how it follows changes (hot reload).

`--maintenance-config secret/<namespace>/<name>[/<key>]` (or `configmap/...`; key default
`maintenance.yaml`) names the object. `ConfigWatcher.poll` reads it; when its resourceVersion moved,
the text is loaded with the engine's `load_config`. A text that does not load never replaces the
config in use: the last good one stays active and the outcome carries the ConfigError's message (the
caller logs it, posts a Warning Event on the object and sets a metric). Before the first good config
`config` is None and nothing is reconciled.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import Config, load_config
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config_source import (
    KINDS, ConfigSource, extract_text)

MISSING = '<missing>'   # the resourceVersion we remember for an object that does not exist


@dataclasses.dataclass
class PollOutcome:
    """What one poll found. `changed`: a new config is active. `failed`: the object changed but did not load
    (`error` says why, the last good config stays). `unreachable`: the API did not answer (retried next poll)."""

    changed: bool = False
    failed: bool = False
    unreachable: bool = False
    error: str = ''
    version: str = ''
    obj: Optional[Dict[str, Any]] = None
    warnings: tuple = ()


class ConfigWatcher:
    """Holds the config in use; `poll()` reloads it when the object's resourceVersion moved.

    `fetch` returns the object or None when it does not exist, and raises on API errors. Each version is
    judged once: a broken text is reported once, not at every poll, and retried only when it changes.
    """

    def __init__(self, source: ConfigSource, fetch: Callable[[], Optional[Dict[str, Any]]],
                 environ: Optional[Mapping[str, str]] = None):
        self.source = source
        self.fetch = fetch
        self.environ = environ
        self.config: Optional[Config] = None
        self.version = ''          # resourceVersion of the active config
        self.seen = ''             # resourceVersion judged last (good or bad)
        self.error = ''            # why the newest version is not active ('' when it is)

    def poll(self) -> PollOutcome:
        try:
            obj = self.fetch()
        except Exception as exc:  # API down, RBAC: keep what we have and say so
            return PollOutcome(unreachable=True, error='cannot read %s: %s' % (self.source, exc))
        version = MISSING if obj is None else str((obj.get('metadata') or {}).get('resourceVersion') or '')
        if version == self.seen:
            return PollOutcome(version=version, obj=obj)
        self.seen = version
        try:
            if obj is None:
                raise ConfigError('', 'exists', '%s %s/%s does not exist' % (KINDS[self.source.kind], self.source.namespace, self.source.name))
            config = load_config(extract_text(self.source, obj), self.environ)
        except ConfigError as exc:
            self.error = str(exc)
            return PollOutcome(failed=True, error=self.error, version=version, obj=obj)
        except Exception as exc:  # a loader bug must not stop the loop; the old config stays
            self.error = 'cannot load %s: %s: %s' % (self.source, type(exc).__name__, exc)
            return PollOutcome(failed=True, error=self.error, version=version, obj=obj)
        self.config, self.version, self.error = config, version, ''
        return PollOutcome(changed=True, version=version, obj=obj, warnings=tuple(config.warnings))
