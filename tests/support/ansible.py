"""Run real `ansible-playbook` against localhost and read the results (json callback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_BIN = os.path.dirname(sys.executable)


def ansible_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = dict(os.environ)
    env.update({
        'ANSIBLE_COLLECTIONS_PATH': os.path.join(REPO, '.build', 'collections'),
        # ansible.builtin.json redirects to ansible.posix (not installed): use the test callback beside this file.
        'ANSIBLE_STDOUT_CALLBACK': 'steward_json',
        'ANSIBLE_CALLBACK_PLUGINS': os.path.join(os.path.dirname(os.path.abspath(__file__)), 'callback_plugins'),
        'ANSIBLE_HOST_KEY_CHECKING': 'False',
        'ANSIBLE_RETRY_FILES_ENABLED': 'False',
        'ANSIBLE_NOCOLOR': '1',
        'ANSIBLE_DEPRECATION_WARNINGS': 'False',
        'ANSIBLE_LOCALHOST_WARNING': 'False',
        'ANSIBLE_INVENTORY_UNPARSED_WARNING': 'False',
    })
    env.update(extra or {})
    return env


class PlaybookResult:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        try:
            self.data = json.loads(proc.stdout[proc.stdout.index('{'):])
        except ValueError:
            self.data = {'plays': [], 'stats': {}}

    @property
    def stats(self) -> Dict[str, Dict[str, int]]:
        return self.data.get('stats', {})

    def changed(self, host: str = 'localhost') -> int:
        return self.stats.get(host, {}).get('changed', 0)

    def tasks(self) -> List[Dict[str, Any]]:
        return [t for play in self.data.get('plays', []) for t in play.get('tasks', [])]

    def result(self, task_name: str, host: str = 'localhost') -> Dict[str, Any]:
        """The result of the (last) task with this name on `host`."""
        found = [t['hosts'][host] for t in self.tasks() if t['task']['name'] == task_name and host in t['hosts']]
        if not found:
            raise KeyError('no task %r for %s; rc=%s stderr=%s' % (task_name, host, self.rc, self.stderr[-2000:]))
        return found[-1]

    def __repr__(self) -> str:
        return 'PlaybookResult(rc=%s, stats=%s)' % (self.rc, self.stats)


def run_playbook(playbook: Any, *, check: bool = False, diff: bool = False, inventory: Optional[str] = None,
                 extra_vars: Optional[Dict[str, Any]] = None, env: Optional[Dict[str, str]] = None,
                 args: Optional[List[str]] = None, timeout: int = 600) -> PlaybookResult:
    """`playbook` is a list of plays (written to a temp file) or an FQCN / path string."""
    with tempfile.TemporaryDirectory() as tmp:
        if isinstance(playbook, (list, dict)):
            path = os.path.join(tmp, 'play.yml')
            with open(path, 'w') as f:
                yaml.safe_dump(playbook if isinstance(playbook, list) else [playbook], f)
        else:
            path = playbook
        cmd = [os.path.join(VENV_BIN, 'ansible-playbook'), path,
               '-e', 'ansible_python_interpreter=%s' % sys.executable]
        if inventory:
            cmd += ['-i', inventory]
        else:
            cmd += ['-i', 'localhost,', '-c', 'local']
        if extra_vars:
            vars_path = os.path.join(tmp, 'vars.json')
            with open(vars_path, 'w') as f:
                json.dump(extra_vars, f)
            cmd += ['-e', '@' + vars_path]
        if check:
            cmd.append('--check')
        if diff:
            cmd.append('--diff')
        cmd += args or []
        proc = subprocess.run(cmd, capture_output=True, text=True, env=ansible_env(env), timeout=timeout, cwd=tmp,
                              check=False)
        return PlaybookResult(proc)


def local_play(tasks: List[Dict[str, Any]], **play: Any) -> List[Dict[str, Any]]:
    """A one-play playbook on localhost with local connection and no fact gathering."""
    base = {'hosts': 'localhost', 'connection': 'local', 'gather_facts': False, 'tasks': tasks}
    base.update(play)
    return [base]
