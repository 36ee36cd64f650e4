# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation home: every input (module options, host facts, config files, custom resources)
passes these checks before anything acts, in check mode too. Each check returns the clean value
or raises InvalidInput(field, rule, message); none of them touches anything but the filesystem's
metadata (stat), so a check never changes state.

Durations: common/durations.py. Kubernetes and DNS names: common/names.py.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import stat
from typing import Any, Iterable, Mapping, Optional, Sequence, Tuple
from urllib.parse import urlsplit

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, shown

# C0 control characters other than tab, newline, carriage return and NUL (those have their own message), and DEL.
_CONTROL = re.compile('[\x01-\x08\x0b\x0c\x0e-\x1f\x7f]')
# Every timeout has an upper bound: a typo of 1e999 must not turn into "wait forever".
MAX_TIMEOUT_SECONDS = 7 * 24 * 3600.0
# A host in a URL: DNS labels (underscores tolerated, as resolvers do) or an IPv4 address; IPv6 is checked apart.
_HOST = re.compile(r'^[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?)*\.?$')
# Directories never used as data dirs, stores or roots to move or delete.
SYSTEM_DIRS = frozenset(['/', '/bin', '/boot', '/dev', '/etc', '/home', '/lib', '/lib32', '/lib64', '/libx32', '/media',
                         '/mnt', '/opt', '/proc', '/root', '/run', '/sbin', '/srv', '/sys', '/tmp', '/usr', '/var',
                         '/usr/bin', '/usr/lib', '/usr/local', '/usr/sbin', '/var/lib', '/var/log', '/var/run'])


def number(value: Any, field: str, minimum: Optional[float] = None, maximum: Optional[float] = None,
           exclusive_minimum: bool = False) -> float:
    """A finite real number within bounds (bools are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise InvalidInput(field, 'number', 'expected a number, got %s' % shown(value), value) from None
        else:
            raise InvalidInput(field, 'number', 'expected a number, got %s' % shown(value), value)
    if not math.isfinite(value):
        raise InvalidInput(field, 'finite', 'must be a finite number, got %s' % shown(value), value)
    if minimum is not None and (value <= minimum if exclusive_minimum else value < minimum):
        raise InvalidInput(field, 'minimum', 'must be %s %s, got %s' % (
            'greater than' if exclusive_minimum else 'at least', _fmt(minimum), shown(value)), value)
    if maximum is not None and value > maximum:
        raise InvalidInput(field, 'maximum', 'must be at most %s, got %s' % (_fmt(maximum), shown(value)), value)
    return float(value)


def integer(value: Any, field: str, minimum: Optional[int] = None, maximum: Optional[int] = None) -> int:
    """A whole number within bounds (no bools, no 2.5; '3' is refused where a YAML int is expected)."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise InvalidInput(field, 'integer', 'expected a whole number, got %s' % shown(value), value)
    if minimum is not None and value < minimum:
        raise InvalidInput(field, 'minimum', 'must be at least %d, got %d' % (minimum, value), value)
    if maximum is not None and value > maximum:
        raise InvalidInput(field, 'maximum', 'must be at most %d, got %d' % (maximum, value), value)
    return value


def boolean(value: Any, field: str) -> bool:
    """true or false as YAML/JSON booleans; the text "false" (truthy in Python) or 0/1 are refused."""
    if not isinstance(value, bool):
        raise InvalidInput(field, 'boolean', 'expected true or false, got %s' % shown(value), value)
    return value


def optional_boolean(section: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    """A boolean field of an object (`<where>.<key>`) that may be left out: `enabled: "false"` is text (and truthy),
    refused rather than read as on."""
    value = section.get(key)
    return default if value is None else boolean(value, '%s.%s' % (where, key))


def mapping(value: Any, field: str, required: bool = False) -> Mapping[str, Any]:
    """An object (a mapping); an absent optional one is empty."""
    if value is None and not required:
        return {}
    if value is None:
        raise InvalidInput(field, 'required', 'required')
    if not isinstance(value, Mapping):
        raise InvalidInput(field, 'type', 'expected an object, got %r' % (value,), value)
    return value


def timeout(value: Any, field: str, maximum: float = MAX_TIMEOUT_SECONDS) -> float:
    """Seconds to wait: positive, finite, at most `maximum` (a week by default)."""
    return number(value, field, minimum=0, maximum=maximum, exclusive_minimum=True)


def text(value: Any, field: str, allow_empty: bool = False, max_length: int = 4096) -> str:
    """A one-line string: no newline, carriage return or NUL (names, reasons, identifiers)."""
    if not isinstance(value, str):
        raise InvalidInput(field, 'string', 'expected a string, got %s' % shown(value), value)
    if not value and not allow_empty:
        raise InvalidInput(field, 'non-empty', 'must not be empty', value)
    if any(c in value for c in '\n\r\x00'):
        raise InvalidInput(field, 'one-line', 'must not contain a newline, carriage return or NUL, got %s'
                           % shown(value), value)
    if _CONTROL.search(value):
        raise InvalidInput(field, 'control-character', 'must not contain control characters, got %s' % shown(value),
                           value)
    if len(value) > max_length:
        raise InvalidInput(field, 'max-length', 'must be at most %d characters, got %d' % (max_length, len(value)))
    return value


def credential(value: Any, field: str, max_length: int = 16384) -> str:
    """A secret that travels in a header or a signature (a token, a password, an access key): one line of printable
    text, checked without ever showing the value (a control character would end in the HTTP library's traceback)."""
    if not isinstance(value, str):
        raise InvalidInput(field, 'string', 'expected a string', secret=True)
    if not value:
        raise InvalidInput(field, 'non-empty', 'must not be empty', secret=True)
    if _CONTROL.search(value) or any(c in value for c in '\n\r\x00'):
        raise InvalidInput(field, 'control-character', 'must not contain control characters (value not shown)',
                           secret=True)
    if len(value) > max_length:
        raise InvalidInput(field, 'max-length', 'must be at most %d characters' % max_length, secret=True)
    return value


def port(value: Any, field: str) -> int:
    """A TCP port: a whole number from 1 to 65535."""
    return integer(value, field, minimum=1, maximum=65535)


def cidr(value: Any, field: str) -> str:
    """An IPv4 or IPv6 network in CIDR notation with no host bits set (`10.96.0.0/12`); the normalised text."""
    text_value = text(value, field)
    try:
        return str(ipaddress.ip_network(text_value, strict=True))
    except ValueError as exc:
        raise InvalidInput(field, 'cidr', 'expected a network in CIDR form such as 10.96.0.0/12, got %s (%s)'
                           % (shown(value), exc), value) from None


def path_component(value: Any, field: str) -> str:
    """One name inside a directory: no `/`, not `.` or `..`, one line."""
    name = text(value, field)
    if '/' in name or name in ('.', '..'):
        raise InvalidInput(field, 'path-component', 'must be a single name without "/" and not "." or "..", got %s'
                           % shown(value), value)
    return name


def absolute_path(value: Any, field: str) -> str:
    """An absolute, normalised path (`..` segments refused rather than resolved)."""
    path = text(value, field)
    if not os.path.isabs(path):
        raise InvalidInput(field, 'absolute-path', 'must be an absolute path, got %s' % shown(value), value)
    if '..' in path.split('/'):
        raise InvalidInput(field, 'absolute-path', 'must not contain "..", got %s' % shown(value), value)
    return os.path.normpath(path)


def existing_file(value: Any, field: str, readable: bool = True) -> str:
    """A path naming an existing regular file (after symlinks), readable by this process."""
    path = text(value, field)
    path = os.path.expanduser(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InvalidInput(field, 'exists', '%s does not exist' % shown(path), path) from None
    except OSError as exc:
        raise InvalidInput(field, 'exists', 'cannot read %s: %s' % (shown(path), exc.strerror), path) from None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidInput(field, 'file', '%s is not a regular file' % shown(path), path)
    if readable and not os.access(path, os.R_OK):
        raise InvalidInput(field, 'readable', '%s is not readable by this user' % shown(path), path)
    return path


def regular_file_or_absent(value: Any, field: str) -> str:
    """An absolute path that is a regular file or nothing yet (a pid file, a file this run writes): a directory, a
    FIFO, a socket or a device is refused before anything opens it - opening a FIFO blocks until a writer comes."""
    path = absolute_path(value, field)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise InvalidInput(field, 'exists', 'cannot read %s: %s' % (shown(path), exc.strerror), path) from None
    if not stat.S_ISREG(st.st_mode):
        what = 'a directory' if stat.S_ISDIR(st.st_mode) else 'not a regular file (a FIFO, socket or device)'
        raise InvalidInput(field, 'file', '%s is %s' % (shown(path), what), path)
    return path


def executable(value: Any, field: str) -> str:
    """A path naming an existing regular file this process may execute (a tool: etcdutl, etcd, haproxy)."""
    path = existing_file(value, field, readable=False)
    if not os.access(path, os.X_OK):
        raise InvalidInput(field, 'executable', '%s is not executable by this user' % shown(path), path)
    return path


def existing_dir(value: Any, field: str) -> str:
    """A path naming an existing directory."""
    path = os.path.expanduser(text(value, field))
    if not os.path.isdir(path):
        rule, what = ('directory', 'is not a directory') if os.path.exists(path) else ('exists', 'does not exist')
        raise InvalidInput(field, rule, '%s %s' % (shown(path), what), path)
    return path


def safe_target_dir(value: Any, field: str) -> str:
    """A directory we may create, move aside or delete: absolute, not a symlink, not a system directory,
    and either absent or a real directory (never a regular file)."""
    path = absolute_path(value, field)
    if path in SYSTEM_DIRS:
        raise InvalidInput(field, 'system-dir', 'refusing %s: a system directory' % shown(path), path)
    if os.path.islink(path):
        raise InvalidInput(field, 'not-symlink', '%s is a symbolic link; give the real directory' % shown(path), path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise InvalidInput(field, 'directory', '%s exists and is not a directory' % shown(path), path)
    return path


def file_mode(value: Any, field: str) -> int:
    """A file mode as ansible.builtin.file reads it: an octal string ('0600', '600', '0o600', up to 0o7777)
    or an int that already is the mode's value (YAML's 0600 is 384). A bare int above 0o777, like 644,
    is refused: YAML read it as decimal (= 0o1204), which is never what was meant."""
    if isinstance(value, bool):
        raise InvalidInput(field, 'file-mode', 'expected an octal mode such as "0600", got %s' % shown(value), value)
    if isinstance(value, int):
        # YAML's `mode: 0644` arrives as 420 and is fine; `mode: 644` arrives as 644 (= 0o1204: sticky bit set).
        # An int above 0o777 is that mistake far more often than a wish for setuid/setgid/sticky bits.
        if not 0 <= value <= 0o777:
            hint = (' (YAML read %d as a decimal number; quote it: "0%d")' % (value, value)
                    if set(str(value)) <= set('01234567') else '')
            raise InvalidInput(field, 'file-mode', 'must be an octal mode up to 0777 or a quoted string such as '
                               '"0600", got %s%s' % (shown(value), hint), value)
        return value
    if isinstance(value, str):
        digits = value[2:] if value.lower().startswith('0o') else value
        if digits and len(digits) <= 5 and set(digits) <= set('01234567'):
            mode = int(digits, 8)
            if mode <= 0o7777:
                return mode
    raise InvalidInput(field, 'file-mode', 'expected an octal mode such as "0600", got %s' % shown(value), value)


def optional_file(value: Any, field: str) -> Optional[str]:
    """None when the option was not given; else an existing readable regular file (an empty string is refused)."""
    return None if value is None else existing_file(value, field)


def tls_files(ca_cert: Any, client_cert: Any, client_key: Any, prefix: str = '') -> None:
    """The TLS files an option group names: each given one an existing readable file, and a client certificate
    only with its key (and a key only with its certificate). `prefix` names the group (`etcd_` -> `etcd_ca_cert`)."""
    for name, value in (('ca_cert', ca_cert), ('client_cert', client_cert), ('client_key', client_key)):
        optional_file(value, prefix + name)
    if bool(client_cert) != bool(client_key):
        have, missing = ('client_cert', 'client_key') if client_cert else ('client_key', 'client_cert')
        raise InvalidInput(prefix + missing, 'key-pair', 'is required with %s%s: a client certificate needs its key'
                           % (prefix, have))


def endpoint_url(value: Any, field: str, schemes: Sequence[str] = ('http', 'https'), default_scheme: str = '') -> str:
    """A URL with one of `schemes`, a host and a valid port (`host:port` alone is read with `default_scheme` when
    one is given). Returns it as given (or with the default scheme prepended)."""
    url = text(value, field)
    if '://' not in url and default_scheme:
        url = '%s://%s' % (default_scheme, url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidInput(field, 'url', '%s is not a valid URL: %s' % (shown(value), exc), value) from None
    if parts.scheme not in schemes or not parts.hostname:
        raise InvalidInput(field, 'url', 'expected a URL such as %s://host:port, got %s' % (schemes[0], shown(value)),
                           value)
    if not _HOST.match(parts.hostname) and not _is_ipv6(parts.hostname):
        raise InvalidInput(field, 'url', 'host %s in %s is not a host name or IP address' % (
            shown(parts.hostname), shown(value)), value)
    if port == 0:
        raise InvalidInput(field, 'url', 'port 0 in %s is not a port' % shown(value), value)
    if parts.username is not None or parts.password is not None:   # it would end up in logs and error messages
        raise InvalidInput(field, 'url', 'must not carry a user or password (give the credentials their own '
                           'options)', None, secret=True)
    if parts.fragment:
        raise InvalidInput(field, 'url', 'a #fragment in %s is never sent to a server' % shown(value), value)
    return url


def ip_address(value: Any, field: str) -> str:
    """A host's IPv4 or IPv6 address, returned in its canonical form: not 0.0.0.0/:: (no host) nor multicast."""
    text_value = text(value, field)
    try:
        address = ipaddress.ip_address(text_value)
    except ValueError:
        raise InvalidInput(field, 'ip-address', 'expected an IPv4 or IPv6 address, got %s' % shown(value), value) from None
    if address.is_unspecified or address.is_multicast:
        raise InvalidInput(field, 'ip-address', '%s is not the address of a host (%s)' % (
            shown(value), 'unspecified' if address.is_unspecified else 'multicast'), value)
    return str(address)


def _is_ipv6(host: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address)
    except ValueError:
        return False


def typed_mapping(value: Any, field: str, required: Mapping[str, Tuple[type, ...]],
                  optional: Mapping[str, Tuple[type, ...]] = None) -> Mapping[str, Any]:
    """A mapping checked like an API object: every `required` key present with one of its types, every `optional`
    key absent, None, or one of its types (bool is never taken for int, nor a string for a bool: "no" is truthy).
    Unknown keys pass (facts grow). InvalidInput names `field.key`."""
    if not isinstance(value, Mapping):
        raise InvalidInput(field, 'mapping', 'expected a mapping, got %s' % shown(value), value)
    for key, types in list(required.items()) + list((optional or {}).items()):
        where = '%s.%s' % (field, key)
        if key not in value or value[key] is None:
            if key in required:
                raise InvalidInput(where, 'required', 'is required', None)
            continue
        item = value[key]
        if not isinstance(item, types) or (isinstance(item, bool) and bool not in types):
            wanted = ' or '.join(t.__name__ for t in types)
            raise InvalidInput(where, 'type', 'expected %s, got %s' % (wanted, shown(item)), item)
    return value


# Values a parsed document may hold, counted as a reader sees them (a YAML alias counts each time it is used).
MAX_DOCUMENT_VALUES = 1000000


def document_size(data: Any, field: str, limit: int = MAX_DOCUMENT_VALUES) -> Any:
    """A parsed YAML/JSON document that stays within `limit` values once its aliases are followed: YAML's anchors
    let a 1 KiB "billion laughs" file stand for 10^9 values, which any code that walks it (interpolation, a copy,
    JSON) would try to build. Counting stops at the limit, so the check itself stays cheap."""
    count, stack = 0, [data]
    while stack:
        item = stack.pop()
        count += 1
        if count > limit:
            raise InvalidInput(field, 'max-size', 'holds more than %d values once its YAML aliases are expanded '
                               '(a "billion laughs" document?)' % limit)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return data


def one_of(value: Any, field: str, choices: Iterable[Any]) -> Any:
    options = list(choices)
    if value not in options:
        listed = ', '.join(repr(c) for c in options)
        raise InvalidInput(field, 'choice', 'must be one of %s, got %s' % (listed, shown(value)), value)
    return value


def _fmt(value: float) -> str:
    return ('%d' % value) if float(value).is_integer() else ('%g' % value)
