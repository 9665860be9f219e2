/* test_fork_revisions.c - every row of the fork's revisions table (lib/fork_revisions.c) is a
 * whole revision: named once, its ids where its types are, its blocks a codec builds, and
 * what the GGUF reader and the helps make of it follow from the row alone.  A test build
 * with one more row (tests/cli/fork_rows.sh) runs these over that row too. */
#include "gguf.h"
#include "harness.h"

#include <stdio.h>
#include <string.h>

static const char *const turbo_names[3] = {"turbo2", "turbo3", "turbo4"};

TEST(every_fork_revision_is_named_once_and_found_by_its_name)
{
    uint32_t n = tq_fork_revision_count();
    CHECK(n >= 1 && n <= TQ_FORK_MAX_REVISIONS, "%u rows", n);
    char list[1024];
    tq_type_profile_list(list, sizeof list, 0);
    int newest = 0;
    for (uint32_t rev = 0; rev < n; rev++) {
        const tq_fork_revision *r = tq_fork_revision_at(rev);
        tq_type_profile p = -1;
        CHECK(r && r->name[0], "row %u has no name", rev);
        CHECK(!tq_type_profile_parse(r->name, &p) && p == (int)rev, "%s parses to %d, want %u",
              r->name, p, rev);
        CHECK(!strcmp(tq_type_profile_name(p), r->name), "%s named back as %s", r->name,
              tq_type_profile_name(p));
        CHECK(strstr(list, r->name) != NULL, "%s not in the list the helps print: %s", r->name,
              list);
        newest += (r->flags & TQ_FORK_NEWEST) != 0;
    }
    CHECK(tq_fork_revision_at(n) == NULL, "a row past the last");
    CHECK(newest == 1, "%d rows flagged newest, want 1", newest);
}

TEST(every_fork_revision_gives_its_ids_the_types_its_row_says)
{
    for (uint32_t rev = 0; rev < tq_fork_revision_count(); rev++) {
        const tq_fork_revision *r = tq_fork_revision_at(rev);
        const int ids[5] = {r->turbo2, r->turbo3, r->turbo4, r->tq3_1s, r->tq4_1s};
        const char *names[5] = {"turbo2", "turbo3", "turbo4", "tq3_1s", "tq4_1s"};
        for (int i = 0; i < 5; i++) {
            if (ids[i] < 0) continue;
            CHECK(ids[i] > r->last_upstream, "%s: %s's id %d among upstream's (0..%d)", r->name,
                  names[i], ids[i], r->last_upstream);
            for (int j = 0; j < i; j++)
                CHECK(ids[j] != ids[i], "%s: %s and %s share id %d", r->name, names[j],
                      names[i], ids[i]);
            const tq_ggml_type *t = tq_ggml_type_get((tq_type_profile)rev, ids[i]);
            CHECK(t && !strcmp(t->name, names[i]), "%s: id %d is %s, want %s", r->name, ids[i],
                  t ? t->name : "nothing", names[i]);
            CHECK(t->bytes == tq_dtype_block_bytes((tq_dtype)t->dtype),
                  "%s: %s blocks of %u bytes, its element type's %zu", r->name, names[i],
                  t->bytes, tq_dtype_block_bytes((tq_dtype)t->dtype));
        }
    }
}

TEST(every_fork_revision_blocks_build_a_codec_of_their_type)
{
    for (uint32_t rev = 0; rev < tq_fork_revision_count(); rev++) {
        const tq_fork_revision *r = tq_fork_revision_at(rev);
        for (uint32_t bits = 2; bits <= 4; bits++) {
            tq_dtype t = tq_fork_dtype(rev, bits);
            uint32_t first = 99;
            uint32_t b = 0;
            CHECK(tq_fork_dtype_of(t, &first, &b) && b == bits && first <= rev,
                  "%s turbo%u: type %d tells revision %u, bits %u", r->name, bits, (int)t, first,
                  b);
            CHECK(tq_fork_dtype(first, bits) == t, "%s turbo%u: its first row's type differs",
                  r->name, bits);
            CHECK(!strcmp(tq_dtype_name(t), turbo_names[bits - 2]), "%s: type named %s",
                  r->name, tq_dtype_name(t));
            tq_codec_desc d = {(tq_codec_kind)(TQ_CODEC_TURBO2 + (int)bits - 2), 0, 0, 0, 0, 0, 0,
                               rev};
            tq_codec *c = NULL;
            CHECK(tq_codec_new(tq_test_ctx(), &d, &c) == TQ_OK, "%s turbo%u: %s", r->name, bits,
                  tq_ctx_error(tq_test_ctx()));
            CHECK(tq_codec_block_bytes(c) == tq_dtype_block_bytes(t) &&
                      tq_codec_block_values(c) == 128,
                  "%s turbo%u: codec blocks of %zu bytes, type's %zu", r->name, bits,
                  tq_codec_block_bytes(c), tq_dtype_block_bytes(t));
            char want[48];
            if (first)
                snprintf(want, sizeof want, "turbo%u-%s", bits, tq_fork_revision_at(first)->name);
            else
                snprintf(want, sizeof want, "turbo%u", bits);
            CHECK(!strcmp(tq_codec_name(c), want), "%s: codec %s, want %s", r->name,
                  tq_codec_name(c), want);
            tq_codec_free(c);
        }
    }
    tq_codec_desc past = {TQ_CODEC_TURBO3, 0, 0, 0, 0, 0, 0, tq_fork_revision_count()};
    tq_codec *c = NULL;
    CHECK(tq_codec_new(tq_test_ctx(), &past, &c) == TQ_ERR_ARG, "a revision past the last row");
    tq_codec_desc other = {TQ_CODEC_TQ, 128, 4, 1, 0, 0, 0, 1};
    CHECK(tq_codec_new(tq_test_ctx(), &other, &c) == TQ_ERR_ARG, "fork_rev on the tq codec");
}
