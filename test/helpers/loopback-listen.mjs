// Preloaded (--import) into a third-party server a test starts (test/helpers/mcp-everything.ts):
// a listen() given only a port (as `app.listen(process.env.PORT)` does, on every interface) binds
// 127.0.0.1 instead, so the server is reachable on loopback only; and once it listens, its port is
// written to stderr as `loopback-listen: PORT`, so a server started with PORT=0 says where it is.
import { Server } from 'node:net'

const listen = Server.prototype.listen
Server.prototype.listen = function (...args) {
  if ((typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]))) && typeof args[1] !== 'string') {
    args.splice(1, 0, '127.0.0.1')
    this.once('listening', () => { process.stderr.write(`loopback-listen: ${this.address().port}\n`) })
  }
  return listen.apply(this, args)
}
