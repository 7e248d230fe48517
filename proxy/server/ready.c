/*
 * Bound addresses and the ready file (see proxy/server/ready.h).  Called once at
 * start by proxy/server/server.c and sim/main.c, never on the hot path.
 */
#include "proxy/server/ready.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>

int tt_sock_name(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[INET6_ADDRSTRLEN];

    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        return -1;
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ss;
        if (inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host)) == NULL)
            return -1;
        snprintf(buf, len, "[%s]:%u", host, (unsigned)ntohs(s6->sin6_port));
    } else if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;
        if (inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host)) == NULL)
            return -1;
        snprintf(buf, len, "%s:%u", host, (unsigned)ntohs(s4->sin_port));
    } else {
        return -1;
    }
    return 0;
}

int tt_ready_write(const char *path, const struct tt_ready_kv *kv, size_t n,
                   char *err, size_t errlen)
{
    cJSON *o = cJSON_CreateObject();
    char *text = NULL, *tmp = NULL;
    FILE *f = NULL;
    size_t i, tlen;
    int rc = -1;

    if (o == NULL || cJSON_AddNumberToObject(o, "pid", (double)getpid()) == NULL)
        goto oom;
    for (i = 0; i < n; i++) {
        cJSON *v = kv[i].value != NULL ? cJSON_AddStringToObject(o, kv[i].name, kv[i].value)
                                       : cJSON_AddNullToObject(o, kv[i].name);
        if (v == NULL)
            goto oom;
    }
    text = cJSON_PrintUnformatted(o);
    tlen = strlen(path) + 16;
    tmp = malloc(tlen);
    if (text == NULL || tmp == NULL)
        goto oom;
    /* same directory, so that rename() is atomic */
    snprintf(tmp, tlen, "%s.%ld.tmp", path, (long)getpid());
    f = fopen(tmp, "w");
    if (f == NULL) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    if (fprintf(f, "%s\n", text) < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        fclose(f);
        unlink(tmp);
        goto out;
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    rc = 0;
    goto out;
oom:
    snprintf(err, errlen, "out of memory");
out:
    free(tmp);
    cJSON_free(text);
    cJSON_Delete(o);
    return rc;
}
