"""The broker container: several brokers in one process, added and removed while it runs.

RocketMQ 5 (`container/` module: `BrokerContainer`, `BrokerContainerConfig`,
`BrokerContainerStartup`, `BrokerContainerProcessor`; started by `mqbrokercontainer`) behaves so:

- The container reads its own properties file (`-c`): `listenPort` (the startup sets 10811
  before reading the file), `namesrvAddr` (`;`-separated), `brokerConfigPaths` (broker
  properties files separated by `:`; `-b` on the command line takes their place), plus
  `brokerContainerIP`, `configBlackList` and the NameServer-address fetch settings. At start it
  creates and starts a broker from each file, in order; a file that cannot be read or a broker
  that fails to start ends the whole process there.
- Each broker keeps its own `listenPort` (and `listenPort - 2` for its fast channel, and
  `listenPort + 1` for HA); the container's port answers only the container's requests. Its
  brokers share the container's NameServer client.
- A broker's identity in the container is (`brokerClusterName`, `brokerName`, `brokerId`); a
  DLedger broker's id is the number in its `dLegerSelfId` (`n0` -> 0). Outside controller and
  DLedger modes a master's `brokerId` is forced to 0 and a slave's must be above 0 ("slave
  broker id must be > 0").
- ADD_BROKER (902), header `configPath`: the path of a broker properties file on the
  container's machine; RocketMQ sends no body. Answers SUCCESS, or SYSTEM_ERROR with the
  remark "addBroker config path is empty", "addBroker properties empty" (unreadable file),
  "<cluster>:<name>:<id> has already been added to current broker container" (duplicate) or
  the start failure.
- REMOVE_BROKER (903), header `brokerClusterName`, `brokerName`, `brokerId` (all required):
  stops that broker and answers SUCCESS, or BROKER_NOT_EXIST (211) "Broker not exist".
- The container also answers GET_BROKER_CONFIG (26: its own settings as `key=value` text) and
  UPDATE_BROKER_CONFIG (25: refused with NO_PERMISSION for `configBlackList` keys, which always
  include `brokerConfigPaths`). It does not answer GET_BROKER_RUNTIME_INFO; that is each
  broker's own request on its own port.
- `mqadmin addBroker -c <containerAddr> -b <brokerConfigPath>` and `mqadmin removeBroker
  -c <containerAddr> -b <clusterName>:<brokerName>:<brokerId>` send these two requests and
  print "add broker to <addr> success" / "remove broker from <addr> success".

pocketmq's container (`config.py`, `server.py`) keeps the requests, headers, codes and the
remarks' wording, and differs where RocketMQ's behaviour loses work or hides a mistake: a broker
that fails at start is reported and the others go on (the container serves, so it can be fixed
with addBroker); remarks say which file and which setting; a second broker on a
`storePathRootDir` already in use is refused rather than left to corrupt the first. ADD_BROKER
also accepts the properties as the request body when `configPath` is empty (pocketmq only).
Not done: UPDATE_BROKER_CONFIG (answered REQUEST_CODE_NOT_SUPPORTED), the fast channel on
`listenPort - 2`, a master's store shared with slaves in the same process, and boot hooks.
"""
