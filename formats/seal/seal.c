/* seal.c - sealed bytes (seal.h, SEAL.md) with OpenSSL's libcrypto: HMAC-SHA256 for key ids,
 * HKDF-SHA256 for a file's key, AES-256-GCM for its segments, its random generator for salts.
 * No cipher or hash is written here. */
#define _GNU_SOURCE /* fopencookie */
#include "seal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#define SEAL_VERSION 1u
#define SEAL_LOG2_SEGMENT 16u
#define SEAL_SEGMENT (1u << SEAL_LOG2_SEGMENT)
#define SEAL_TAG 16u

static const char key_id_label[] = "tq key id 1";
static const char file_key_label[] = "tq sealed 1";

/* ------------------------------------------------------------------ keys */

static void key_id(const uint8_t key[TQ_SEAL_KEY_BYTES], uint8_t id[8])
{
    uint8_t mac[32];
    unsigned mac_n = 0;
    HMAC(EVP_sha256(), key, TQ_SEAL_KEY_BYTES, (const uint8_t *)key_id_label,
         sizeof key_id_label - 1, mac, &mac_n);
    memcpy(id, mac, 8);
}

void tq_seal_key_id_hex(const uint8_t id[8], char *buf)
{
    for (int i = 0; i < 8; i++) snprintf(buf + 2 * i, 3, "%02x", id[i]);
}

tq_status tq_seal_keys_load(tq_ctx *ctx, const char *path, tq_seal_keys *keys, int *exposed)
{
    uint8_t raw[TQ_SEAL_KEY_BYTES + 1];
    struct stat sb;
    *exposed = 0;
    if (keys->n == TQ_SEAL_MAX_KEYS)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "%s: at most %d keys", path, TQ_SEAL_MAX_KEYS);
    int fd = open(path, O_RDONLY | O_CLOEXEC); /* a link is followed: secrets are mounted so */
    if (fd < 0) return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: %s", path, strerror(errno));
    ssize_t got = 0;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        close(fd);
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "%s: not a regular file", path);
    }
    for (ssize_t k = 1; k > 0 && got < (ssize_t)sizeof raw; got += k)
        if ((k = read(fd, raw + got, sizeof raw - (size_t)got)) <= 0) break;
    close(fd);
    if (got != TQ_SEAL_KEY_BYTES) {
        OPENSSL_cleanse(raw, sizeof raw);
        return tq_ctx_set_error(ctx, TQ_ERR_ARG,
                                "%s: a key file holds exactly 32 bytes (head -c 32 /dev/urandom "
                                "> KEY), this one %s",
                                path, got > TQ_SEAL_KEY_BYTES ? "more" : "fewer");
    }
    *exposed = (sb.st_mode & 077) != 0;
    tq_status st = tq_seal_keys_add(ctx, keys, raw);
    OPENSSL_cleanse(raw, sizeof raw);
    return st;
}

tq_status tq_seal_keys_add(tq_ctx *ctx, tq_seal_keys *keys, const uint8_t key[TQ_SEAL_KEY_BYTES])
{
    if (keys->n == TQ_SEAL_MAX_KEYS)
        return tq_ctx_set_error(ctx, TQ_ERR_ARG, "at most %d keys", TQ_SEAL_MAX_KEYS);
    memcpy(keys->key[keys->n], key, TQ_SEAL_KEY_BYTES);
    key_id(keys->key[keys->n], keys->id[keys->n]);
    for (uint32_t i = 0; i < keys->n; i++)
        if (!memcmp(keys->id[i], keys->id[keys->n], 8)) return TQ_OK; /* given twice */
    keys->n++;
    return TQ_OK;
}

static tq_seal_keys process_keys;

void tq_seal_keys_use(const tq_seal_keys *keys)
{
    OPENSSL_cleanse(&process_keys, sizeof process_keys);
    if (keys) process_keys = *keys;
}

const tq_seal_keys *tq_seal_keys_current(void) { return process_keys.n ? &process_keys : NULL; }

int tq_seal_mac64_prefixes(const tq_seal_keys *keys, const char *label, const void *data,
                           size_t stride, size_t k, uint64_t *out)
{
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *c = mac ? EVP_MAC_CTX_new(mac) : NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end()};
    int ok = c && EVP_MAC_init(c, keys->key[0], TQ_SEAL_KEY_BYTES, params) &&
             EVP_MAC_update(c, (const uint8_t *)label, strlen(label) + 1);
    for (size_t i = 0; ok && i < k; i++) { /* one pass: each prefix's MAC of the stream so far */
        uint8_t digest[32];
        size_t got = 0;
        ok = EVP_MAC_update(c, (const uint8_t *)data + i * stride, stride);
        EVP_MAC_CTX *at = ok ? EVP_MAC_CTX_dup(c) : NULL;
        ok = at && EVP_MAC_final(at, digest, &got, sizeof digest) && got == sizeof digest;
        EVP_MAC_CTX_free(at);
        out[i] = 0;
        for (int b = 0; ok && b < 8; b++) out[i] = out[i] << 8 | digest[b];
    }
    EVP_MAC_CTX_free(c);
    EVP_MAC_free(mac);
    return ok;
}

/* ------------------------------------------------------------------ the format */

int tq_seal_is_sealed(const void *head, uint64_t n) { return n >= 4 && !memcmp(head, "TQKS", 4); }

void tq_seal_key_id_of(const void *head, uint8_t id[8])
{
    memcpy(id, (const uint8_t *)head + 8, 8);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The file's key: HKDF-SHA256 of the user's key with the file's salt. */
static int file_key(const uint8_t key[TQ_SEAL_KEY_BYTES], const uint8_t *salt, uint8_t out[32])
{
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *kc = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)key, TQ_SEAL_KEY_BYTES),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, 32),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)file_key_label,
                                          sizeof file_key_label - 1),
        OSSL_PARAM_construct_end()};
    int ok = kc && EVP_KDF_derive(kc, out, 32, params) > 0;
    EVP_KDF_CTX_free(kc);
    EVP_KDF_free(kdf);
    return ok;
}

static void nonce_of(uint64_t seg, int last, uint8_t nonce[12])
{
    memset(nonce, 0, 12);
    nonce[0] = (uint8_t)(last != 0);
    for (int i = 0; i < 8; i++) nonce[4 + i] = (uint8_t)(seg >> (56 - 8 * i));
}

/* One segment of n bytes sealed: out gets n bytes of ciphertext and the tag (enc 1), or
 * opened: out gets n - SEAL_TAG bytes (enc 0).  0 when the tag fails or the library does. */
static int seal_segment(EVP_CIPHER_CTX *c, int enc, const uint8_t fkey[32],
                        const uint8_t *header, uint64_t seg, int last, const uint8_t *in,
                        size_t n, uint8_t *out)
{
    uint8_t nonce[12];
    int len = 0;
    size_t body = enc ? n : n - SEAL_TAG;
    nonce_of(seg, last, nonce);
    if (!EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) ||
        !EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) ||
        !EVP_CipherInit_ex(c, NULL, NULL, fkey, nonce, enc) ||
        !EVP_CipherUpdate(c, NULL, &len, header, TQ_SEAL_HEADER))
        return 0;
    if (body && !EVP_CipherUpdate(c, out, &len, in, (int)body)) return 0;
    if (!enc && !EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, SEAL_TAG, (void *)(in + body)))
        return 0;
    if (EVP_CipherFinal_ex(c, out + body, &len) <= 0) return 0;
    return !enc || EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, SEAL_TAG, out + body);
}

/* A new header under keys' first key, with a fresh salt, and the file's key. */
static tq_status new_header(tq_ctx *ctx, const tq_seal_keys *keys, uint8_t *header,
                            uint8_t fkey[32])
{
    if (!keys || !keys->n) return tq_ctx_set_error(ctx, TQ_ERR_ARG, "sealing needs a key");
    memset(header, 0, TQ_SEAL_HEADER);
    memcpy(header, "TQKS", 4);
    put_u32(header + 4, SEAL_VERSION);
    memcpy(header + 8, keys->id[0], 8);
    put_u32(header + 48, SEAL_LOG2_SEGMENT);
    if (RAND_bytes(header + 16, 32) != 1 || !file_key(keys->key[0], header + 16, fkey))
        return tq_ctx_set_error(ctx, TQ_ERR_IO, "the cipher library could not make a key");
    return TQ_OK;
}

/* ------------------------------------------------------------------ opening */

/* Which of keys sealed header; its message when none did. */
static tq_status find_key(tq_ctx *ctx, const tq_seal_keys *keys, const char *label,
                          const uint8_t *header, uint32_t *which)
{
    char hex[17];
    tq_seal_key_id_hex(header + 8, hex);
    if (!keys || !keys->n)
        return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                                "%s is sealed (key id %s): give its key with --key-file or "
                                "TQ_KEY_FILE",
                                label, hex);
    for (uint32_t i = 0; i < keys->n; i++)
        if (!memcmp(keys->id[i], header + 8, 8)) {
            *which = i;
            return TQ_OK;
        }
    char given[17];
    tq_seal_key_id_hex(keys->id[0], given);
    return tq_ctx_set_error(ctx, TQ_ERR_UNSUPPORTED,
                            "%s is sealed with key id %s, not with the key given (%s%s)", label,
                            hex, given, keys->n > 1 ? " and others" : "");
}

tq_status tq_seal_open(tq_ctx *ctx, const tq_seal_keys *keys, const char *label,
                       const uint8_t *sealed, uint64_t n, uint8_t **plain, uint64_t *plain_n)
{
    *plain = NULL;
    *plain_n = 0;
    if (n < TQ_SEAL_HEADER || !tq_seal_is_sealed(sealed, n))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: not sealed bytes", label);
    if (get_u32(sealed + 4) != SEAL_VERSION || get_u32(sealed + 48) != SEAL_LOG2_SEGMENT ||
        get_u32(sealed + 52))
        return tq_ctx_set_error(ctx, TQ_ERR_FORMAT, "%s: sealed as version %u, which this tq "
                                "does not read", label, get_u32(sealed + 4));
    uint32_t which = 0;
    tq_status st = find_key(ctx, keys, label, sealed, &which);
    if (st) return st;
    uint64_t body = n - TQ_SEAL_HEADER, whole = SEAL_SEGMENT + SEAL_TAG;
    uint64_t n_seg = body ? (body + whole - 1) / whole : 0;
    uint64_t last = n_seg ? body - (n_seg - 1) * whole : 0;
    if (!n_seg || last < SEAL_TAG || (n_seg > 1 && last == SEAL_TAG))
        return tq_ctx_set_error(ctx, TQ_ERR_CORRUPT, "%s: sealed bytes cut short (%llu bytes)",
                                label, (unsigned long long)n);
    uint8_t fkey[32];
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    uint64_t out_n = body - n_seg * SEAL_TAG;
    uint8_t *out = malloc(out_n ? out_n : 1);
    if (!c || !out || !file_key(keys->key[which], sealed + 16, fkey)) {
        EVP_CIPHER_CTX_free(c);
        free(out);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    for (uint64_t i = 0; i < n_seg && !st; i++) {
        size_t len = (size_t)(i + 1 < n_seg ? whole : last);
        if (!seal_segment(c, 0, fkey, sealed, i, i + 1 == n_seg,
                          sealed + TQ_SEAL_HEADER + i * whole, len, out + i * SEAL_SEGMENT))
            st = tq_ctx_set_error(ctx, TQ_ERR_CORRUPT,
                                  "%s: segment %llu of %llu does not authenticate (damaged, cut "
                                  "or not sealed with this key)",
                                  label, (unsigned long long)i + 1, (unsigned long long)n_seg);
    }
    OPENSSL_cleanse(fkey, sizeof fkey);
    EVP_CIPHER_CTX_free(c);
    if (st) {
        free(out);
        return st;
    }
    *plain = out;
    *plain_n = out_n;
    return TQ_OK;
}

/* ------------------------------------------------------------------ sealing */

struct tq_sealer {
    FILE *dst, *plain;
    EVP_CIPHER_CTX *c;
    uint8_t fkey[32];
    uint8_t header[TQ_SEAL_HEADER];
    uint8_t buf[SEAL_SEGMENT];             /* [SEAL_SEGMENT]: the segment being filled */
    uint8_t out[SEAL_SEGMENT + SEAL_TAG];  /* its sealed bytes */
    size_t fill;
    uint64_t seg;
    int failed, aborted;
    char why[160];
};

static int flush_segment(tq_sealer *s, int last)
{
    if (!seal_segment(s->c, 1, s->fkey, s->header, s->seg, last, s->buf, s->fill, s->out)) {
        snprintf(s->why, sizeof s->why, "the cipher library failed");
        return 0;
    }
    if (fwrite(s->out, 1, s->fill + SEAL_TAG, s->dst) != s->fill + SEAL_TAG) {
        snprintf(s->why, sizeof s->why, "%s", strerror(errno ? errno : EIO));
        return 0;
    }
    s->seg++;
    s->fill = 0;
    return 1;
}

/* A full segment is sealed only when more bytes come: the last must be known as last. */
static ssize_t sealer_write(void *cookie, const char *p, size_t n)
{
    tq_sealer *s = cookie;
    size_t done = 0;
    while (!s->failed && done < n) {
        if (s->fill == SEAL_SEGMENT && !flush_segment(s, 0)) {
            s->failed = 1;
            break;
        }
        size_t k = n - done < SEAL_SEGMENT - s->fill ? n - done : SEAL_SEGMENT - s->fill;
        memcpy(s->buf + s->fill, p + done, k);
        s->fill += k;
        done += k;
    }
    if (!s->failed) return (ssize_t)n;
    errno = EIO;
    return -1;
}

static int sealer_close(void *cookie)
{
    tq_sealer *s = cookie;
    if (s->aborted || s->failed) return s->aborted ? 0 : -1;
    if (!flush_segment(s, 1)) s->failed = 1;
    return s->failed ? -1 : 0;
}

tq_status tq_sealer_begin(tq_ctx *ctx, const tq_seal_keys *keys, FILE *dst, tq_sealer **out,
                          FILE **plain)
{
    static const cookie_io_functions_t io = {.write = sealer_write, .close = sealer_close};
    *out = NULL;
    *plain = NULL;
    tq_sealer *s = calloc(1, sizeof *s);
    if (!s || !(s->c = EVP_CIPHER_CTX_new())) {
        free(s);
        return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    }
    s->dst = dst;
    tq_status st = new_header(ctx, keys, s->header, s->fkey);
    if (!st && fwrite(s->header, 1, TQ_SEAL_HEADER, dst) != TQ_SEAL_HEADER)
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "writing failed: %s", strerror(errno));
    if (!st && !(s->plain = fopencookie(s, "w", io)))
        st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (st) {
        EVP_CIPHER_CTX_free(s->c);
        OPENSSL_cleanse(s->fkey, sizeof s->fkey);
        free(s);
        return st;
    }
    setvbuf(s->plain, NULL, _IOFBF, SEAL_SEGMENT);
    *out = s;
    *plain = s->plain;
    return TQ_OK;
}

static void sealer_free(tq_sealer *s)
{
    EVP_CIPHER_CTX_free(s->c);
    OPENSSL_cleanse(s, sizeof *s);
    free(s);
}

tq_status tq_sealer_finish(tq_ctx *ctx, tq_sealer *s)
{
    int bad = fclose(s->plain) != 0;
    tq_status st = TQ_OK;
    if (bad)
        st = tq_ctx_set_error(ctx, TQ_ERR_IO, "writing sealed bytes failed: %s",
                              s->why[0] ? s->why : "an earlier write failed");
    sealer_free(s);
    return st;
}

void tq_sealer_abort(tq_sealer *s)
{
    if (!s) return;
    s->aborted = 1;
    fclose(s->plain);
    sealer_free(s);
}

tq_status tq_seal_bytes(tq_ctx *ctx, const tq_seal_keys *keys, const void *plain, uint64_t n,
                        uint8_t **sealed, uint64_t *sealed_n)
{
    char *buf = NULL;
    size_t len = 0;
    *sealed = NULL;
    *sealed_n = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) return tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    tq_sealer *s;
    FILE *f;
    tq_status st = tq_sealer_begin(ctx, keys, mem, &s, &f);
    if (!st && n && fwrite(plain, 1, n, f) != n) {
        tq_sealer_abort(s);
        st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    } else if (!st) {
        st = tq_sealer_finish(ctx, s);
    }
    if (fclose(mem) && !st) st = tq_ctx_set_error(ctx, TQ_ERR_NOMEM, "out of memory");
    if (st) {
        free(buf);
        return st;
    }
    *sealed = (uint8_t *)buf;
    *sealed_n = len;
    return TQ_OK;
}
