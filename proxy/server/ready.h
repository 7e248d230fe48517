/*
 * What a process bound, for whoever started it: the address of a bound
 * socket as text, and the ready file (--ready-file), a small JSON object
 * written once every listener is up, atomically (a temporary name in the
 * same directory, then rename), so a reader never sees half a file.
 * Owned by proxy/server/ready.c; used by proxy/server/server.c and sim/main.c.
 */
#ifndef TT_READY_H
#define TT_READY_H

#include <stddef.h>

/* "127.0.0.1:8080" / "[::1]:8080" of socket <fd>'s local address; 0 or -1 */
int tt_sock_name(int fd, char *buf, size_t len);

/* one "name": value pair of the ready file; value NULL writes null */
struct tt_ready_kv {
    const char *name;
    const char *value;
};

/*
 * Write {"pid": PID, name: value, ...} to <path> (temp file + rename).
 * Returns 0, or -1 with <err> set.
 */
int tt_ready_write(const char *path, const struct tt_ready_kv *kv, size_t n,
                   char *err, size_t errlen);

#endif
