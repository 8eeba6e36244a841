export {
  CONNECT_REQUEST_STATUSES,
  CONNECT_REQUEST_TTL_MS,
  MAX_PENDING_CONNECT_REQUESTS,
  cancelConnectRequest,
  connectUrlFor,
  declineConnectRequest,
  getConnectRequest,
  listConnectRequests,
  presentConnectRequest,
  purposeSchema,
  requestConnection,
  resolveConnectRequests,
  scopesSchema,
} from './requests.js';
export type { AuthKind, ConnectRequestDeps, ConnectRequestNotices, ConnectRequestRow, ConnectRequestStatus, ConnectRequestView } from './requests.js';
export { ConnectRequestHub, connectRequestChangesChannel } from './hub.js';
export type { ConnectRequestHubOptions, ConnectRequestSink } from './hub.js';
