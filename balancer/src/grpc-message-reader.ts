/** Why a gRPC message stream could not be read. */
export type GrpcReadFailure = { kind: 'too-large'; bytes: number } | { kind: 'compressed' } | { kind: 'bad-flag'; flag: number };

/**
 * Reads gRPC length-prefixed messages (1 flag byte, 4 bytes of length, big-endian) from the
 * chunks of an HTTP/2 stream, where a prefix or a message may be split across chunks. A message
 * whole in one chunk is a view of it (no copy); a split one is copied once into a buffer of its
 * size, which is allocated only after its length was checked against `maxMessageBytes`.
 */
export class GrpcMessageReader {
  private prefix: Buffer | undefined;
  private prefixBytes = 0;
  private message: Buffer | undefined;
  private messageBytes = 0;

  constructor(private readonly maxMessageBytes: number) {}

  /** True while a prefix or a message is partly read. */
  get partial(): boolean {
    return this.prefixBytes > 0 || this.message !== undefined;
  }

  /** Calls `onMessage` for each message the chunk completes; returns why not, when the stream is unreadable (stop then). */
  push(chunk: Buffer, onMessage: (message: Buffer) => void): GrpcReadFailure | undefined {
    let offset = 0;
    while (offset < chunk.length) {
      if (this.message === undefined) {
        let flag: number;
        let length: number;
        if (this.prefixBytes === 0 && chunk.length - offset >= 5) {
          flag = chunk[offset]!;
          length = chunk.readUInt32BE(offset + 1);
          offset += 5;
        } else {
          this.prefix ??= Buffer.allocUnsafe(5);
          const copied = chunk.copy(this.prefix, this.prefixBytes, offset, Math.min(chunk.length, offset + 5 - this.prefixBytes));
          this.prefixBytes += copied;
          offset += copied;
          if (this.prefixBytes < 5) return undefined;
          this.prefixBytes = 0;
          flag = this.prefix[0]!;
          length = this.prefix.readUInt32BE(1);
        }
        // We send no grpc-accept-encoding, so a server has no reason to compress.
        if (flag === 1) return { kind: 'compressed' };
        if (flag !== 0) return { kind: 'bad-flag', flag };
        if (length > this.maxMessageBytes) return { kind: 'too-large', bytes: length };
        if (chunk.length - offset >= length) {
          onMessage(chunk.subarray(offset, offset + length));
          offset += length;
          continue;
        }
        this.message = Buffer.allocUnsafe(length);
        this.messageBytes = 0;
      }
      const copied = chunk.copy(this.message, this.messageBytes, offset);
      this.messageBytes += copied;
      offset += copied;
      if (this.messageBytes === this.message.length) {
        const message = this.message;
        this.message = undefined;
        onMessage(message);
      }
    }
    return undefined;
  }
}
