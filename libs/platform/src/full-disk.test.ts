import * as fs from 'node:fs';

/** The file descriptor of what `o` writes to, swapped for /dev/full's until `room()`: a full disk. */
export function fillDisk(o: { fd: number }): { room(): void } {
  const real = o.fd;
  o.fd = fs.openSync('/dev/full', 'w');
  return {
    room: () => {
      fs.closeSync(o.fd);
      o.fd = real;
    },
  };
}
