/* test_seal.c - sealed bytes (formats/seal/seal.h): what is sealed opens to the same bytes under
 * its key, and any change an attacker can make (a flipped byte, a cut, segments reordered or
 * spliced from another file, a header taken from another file, another key) is refused. */
#include "harness.h"
#include "seal.h"
#include "tq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { SEG = 1 << 16, WHOLE = SEG + 16 };

static void key_file(const char *path, uint8_t fill, size_t n)
{
    FILE *f = fopen(path, "wb");
    for (size_t i = 0; i < n; i++) fputc((int)(fill + i), f);
    fclose(f);
}

/* A keyring of one key made of bytes fill, fill + 1, ... */
static tq_seal_keys keys_of(tq_ctx *ctx, uint8_t fill)
{
    tq_seal_keys k = {0};
    char path[64];
    int exposed;
    snprintf(path, sizeof path, "/tmp/tq-test-key-%d-%u", (int)getpid(), fill);
    key_file(path, fill, 32);
    if (tq_seal_keys_load(ctx, path, &k, &exposed)) k.n = 0;
    unlink(path);
    return k;
}

static uint8_t *pattern(uint64_t n, unsigned seed)
{
    uint8_t *p = malloc(n ? n : 1);
    for (uint64_t i = 0; i < n; i++) p[i] = (uint8_t)((i * 2654435761u + seed) >> 7);
    return p;
}

TEST(sealed_bytes_open_to_the_same_bytes_at_every_segment_boundary)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_seal_keys k = keys_of(ctx, 1);
    CHECK_EQ(k.n, 1);
    const uint64_t sizes[] = {0, 1, SEG - 1, SEG, SEG + 1, 3 * SEG, 3 * SEG + 17};
    for (int i = 0; i < 7; i++) {
        uint8_t *plain = pattern(sizes[i], 3), *sealed, *back;
        uint64_t ns, nb;
        CHECK_OK(ctx, tq_seal_bytes(ctx, &k, plain, sizes[i], &sealed, &ns));
        uint64_t segs = sizes[i] ? (sizes[i] + SEG - 1) / SEG : 1;
        CHECK_EQ_U64(ns, TQ_SEAL_HEADER + sizes[i] + 16 * segs);
        CHECK_OK(ctx, tq_seal_open(ctx, &k, "x", sealed, ns, &back, &nb));
        CHECK_EQ_U64(nb, sizes[i]);
        CHECK(!memcmp(back, plain, sizes[i]), "%llu bytes: they differ",
              (unsigned long long)sizes[i]);
        free(plain);
        free(sealed);
        free(back);
    }
    tq_ctx_free(ctx);
}

TEST(two_seals_of_the_same_bytes_differ)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_seal_keys k = keys_of(ctx, 1);
    uint8_t *plain = pattern(1000, 1), *a, *b;
    uint64_t na, nb;
    CHECK_OK(ctx, tq_seal_bytes(ctx, &k, plain, 1000, &a, &na));
    CHECK_OK(ctx, tq_seal_bytes(ctx, &k, plain, 1000, &b, &nb));
    CHECK_EQ_U64(na, nb);
    CHECK(memcmp(a + 16, b + 16, 32) != 0, "the salts are the same");
    CHECK(memcmp(a + TQ_SEAL_HEADER, b + TQ_SEAL_HEADER, na - TQ_SEAL_HEADER) != 0,
          "the ciphertexts are the same");
    free(plain);
    free(a);
    free(b);
    tq_ctx_free(ctx);
}

/* Opening mutated bytes must fail with code, the message naming why. */
static void check_refused(tq_ctx *ctx, const tq_seal_keys *k, const uint8_t *s, uint64_t n,
                          tq_status code, const char *why, const char *what)
{
    uint8_t *back = NULL;
    uint64_t nb = 0;
    tq_status st = tq_seal_open(ctx, k, "x", s, n, &back, &nb);
    CHECK(st == code, "%s: status %d, expected %d (%s)", what, (int)st, (int)code,
          tq_ctx_error(ctx));
    CHECK(strstr(tq_ctx_error(ctx), why) != NULL, "%s: '%s' does not say '%s'", what,
          tq_ctx_error(ctx), why);
    CHECK(back == NULL, "%s: bytes were returned", what);
    free(back);
}

TEST(a_flipped_byte_anywhere_is_refused)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_seal_keys k = keys_of(ctx, 1);
    uint64_t n0 = 2 * SEG + 100, ns;
    uint8_t *plain = pattern(n0, 5), *s;
    CHECK_OK(ctx, tq_seal_bytes(ctx, &k, plain, n0, &s, &ns));
    /* the salt, the segment size, each segment's first byte, a tag, the last byte */
    const uint64_t at[] = {20, 48, TQ_SEAL_HEADER, TQ_SEAL_HEADER + WHOLE, TQ_SEAL_HEADER + SEG,
                           ns - 1};
    for (int i = 0; i < 6; i++) {
        s[at[i]] ^= 0x10;
        char what[32];
        snprintf(what, sizeof what, "byte %llu", (unsigned long long)at[i]);
        if (at[i] == 48)
            check_refused(ctx, &k, s, ns, TQ_ERR_FORMAT, "does not read", what);
        else
            check_refused(ctx, &k, s, ns, TQ_ERR_CORRUPT, "does not authenticate", what);
        s[at[i]] ^= 0x10;
    }
    free(plain);
    free(s);
    tq_ctx_free(ctx);
}

TEST(a_file_cut_at_a_segment_end_or_inside_one_is_refused)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_seal_keys k = keys_of(ctx, 1);
    uint64_t n0 = 3 * SEG, ns;
    uint8_t *plain = pattern(n0, 6), *s;
    CHECK_OK(ctx, tq_seal_bytes(ctx, &k, plain, n0, &s, &ns));
    /* two whole segments left: the second was not sealed as the last */
    check_refused(ctx, &k, s, TQ_SEAL_HEADER + 2 * WHOLE, TQ_ERR_CORRUPT,
                  "does not authenticate", "cut at a segment end");
    check_refused(ctx, &k, s, ns - 5, TQ_ERR_CORRUPT, "does not authenticate", "cut inside");
    check_refused(ctx, &k, s, TQ_SEAL_HEADER + WHOLE + 10, TQ_ERR_CORRUPT, "cut short",
                  "cut inside a tag's length");
    check_refused(ctx, &k, s, TQ_SEAL_HEADER, TQ_ERR_CORRUPT, "cut short", "the header alone");
    free(plain);
    free(s);
    tq_ctx_free(ctx);
}

TEST(segments_reordered_or_spliced_from_another_file_are_refused)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_seal_keys k = keys_of(ctx, 1);
    uint64_t n0 = 3 * SEG, na, nb;
    uint8_t *plain = pattern(n0, 7), *a, *b;
    CHECK_OK(ctx, tq_seal_bytes(ctx, &k, plain, n0, &a, &na));
    CHECK_OK(ctx, tq_seal_bytes(ctx, &k, plain, n0, &b, &nb));
    uint8_t *mix = malloc(na), *tmp = malloc(WHOLE);
    memcpy(mix, a, na); /* segments 1 and 2 swapped */
    memcpy(tmp, mix + TQ_SEAL_HEADER, WHOLE);
    memcpy(mix + TQ_SEAL_HEADER, mix + TQ_SEAL_HEADER + WHOLE, WHOLE);
    memcpy(mix + TQ_SEAL_HEADER + WHOLE, tmp, WHOLE);
    check_refused(ctx, &k, mix, na, TQ_ERR_CORRUPT, "does not authenticate", "swapped");
    memcpy(mix, a, na); /* the second segment from another file of the same bytes and key */
    memcpy(mix + TQ_SEAL_HEADER + WHOLE, b + TQ_SEAL_HEADER + WHOLE, WHOLE);
    check_refused(ctx, &k, mix, na, TQ_ERR_CORRUPT, "does not authenticate", "spliced");
    memcpy(mix, b, TQ_SEAL_HEADER); /* the header of another file */
    memcpy(mix + TQ_SEAL_HEADER, a + TQ_SEAL_HEADER, na - TQ_SEAL_HEADER);
    check_refused(ctx, &k, mix, na, TQ_ERR_CORRUPT, "does not authenticate", "another header");
    free(mix);
    free(tmp);
    free(plain);
    free(a);
    free(b);
    tq_ctx_free(ctx);
}

TEST(another_key_is_told_from_damage_and_a_rotated_ring_opens_both)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_seal_keys k1 = keys_of(ctx, 1), k2 = keys_of(ctx, 2);
    uint8_t *plain = pattern(500, 8), *s, *back;
    uint64_t ns, nb;
    CHECK_OK(ctx, tq_seal_bytes(ctx, &k1, plain, 500, &s, &ns));
    check_refused(ctx, &k2, s, ns, TQ_ERR_UNSUPPORTED, "not with the key given", "another key");
    check_refused(ctx, NULL, s, ns, TQ_ERR_UNSUPPORTED, "--key-file", "no key");
    tq_seal_keys ring = k2; /* the new key first, the old after it */
    ring.n = 2;
    memcpy(ring.key[1], k1.key[0], 32);
    memcpy(ring.id[1], k1.id[0], 8);
    CHECK_OK(ctx, tq_seal_open(ctx, &ring, "x", s, ns, &back, &nb));
    CHECK(nb == 500 && !memcmp(back, plain, 500), "the old key's bytes differ");
    free(back);
    free(s);
    CHECK_OK(ctx, tq_seal_bytes(ctx, &ring, plain, 500, &s, &ns));
    uint8_t id[8];
    tq_seal_key_id_of(s, id);
    CHECK(!memcmp(id, k2.id[0], 8), "a rotated ring sealed with another than its first key");
    free(s);
    free(plain);
    tq_ctx_free(ctx);
}

TEST(a_key_file_of_other_than_32_bytes_is_refused)
{
    tq_ctx *ctx = tq_ctx_new();
    tq_seal_keys k = {0};
    char path[64];
    int exposed;
    snprintf(path, sizeof path, "/tmp/tq-test-key-%d-short", (int)getpid());
    key_file(path, 1, 31);
    CHECK(tq_seal_keys_load(ctx, path, &k, &exposed) == TQ_ERR_ARG, "31 bytes taken");
    CHECK(strstr(tq_ctx_error(ctx), "exactly 32 bytes") != NULL, "message: %s",
          tq_ctx_error(ctx));
    key_file(path, 1, 33);
    CHECK(tq_seal_keys_load(ctx, path, &k, &exposed) == TQ_ERR_ARG, "33 bytes taken");
    CHECK_EQ(k.n, 0);
    unlink(path);
    tq_ctx_free(ctx);
}
