"""ACL 1.0 of RocketMQ 4.9.x (`plain_acl.yml`): signatures, address patterns, accounts, the
allow/deny decision and live reloading. The broker's RPC hook that calls `AclValidator.check`
lives with the broker; nothing here does network I/O.
"""

from pocketmq.acl.accounts import (
    ANY,
    DENY,
    PUB,
    SUB,
    Account,
    AclDataVersion,
    AclFile,
    AclRules,
    check_perm,
    load_file,
    load_rules,
    parse_file,
    parse_perm,
    perm_name,
)
from pocketmq.acl.addresses import AclConfigError, AddressPattern
from pocketmq.acl.resources import (
    ADMIN_ONLY_CODES,
    ADMIN_ONLY_CODES_4_9_8,
    AclRequestError,
    ResourcePerm,
    needed_perms,
)
from pocketmq.acl.signing import signature, signed_content, verify
from pocketmq.acl.validator import AclValidator, Refusal
from pocketmq.acl.watcher import AclFileWatcher, AclStore, write_atomically

__all__ = [
    "ADMIN_ONLY_CODES",
    "ADMIN_ONLY_CODES_4_9_8",
    "ANY",
    "DENY",
    "PUB",
    "SUB",
    "Account",
    "AclConfigError",
    "AclDataVersion",
    "AclFile",
    "AclFileWatcher",
    "AclRequestError",
    "AclRules",
    "AclStore",
    "AclValidator",
    "AddressPattern",
    "Refusal",
    "ResourcePerm",
    "check_perm",
    "load_file",
    "load_rules",
    "needed_perms",
    "parse_file",
    "parse_perm",
    "perm_name",
    "signature",
    "signed_content",
    "verify",
    "write_atomically",
]
