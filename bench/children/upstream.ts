// The proxy scenario's upstream: a plain node:http server answering every request with the same
// small JSON body (keep-alive). Argument: the port.
import { createServer } from 'node:http';

const UPSTREAM_BODY = Buffer.from(JSON.stringify({ ok: true, items: Array.from({ length: 20 }, (_, i) => ({ id: i, name: `item ${i}` })) }));

const port = Number(process.argv[2]);
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(UPSTREAM_BODY.length) });
    res.end(UPSTREAM_BODY);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(port, '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)));
