// Control-byte groups and the hash index on their own (keys kept in a vector, as
// the arena keeps them in records), in both layouts: narrow (16 slots x 3-byte rows)
// and wide (12 slots x 4-byte rows).
#include <climits>
#include <map>
#include <random>
#include <unordered_set>

#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "group.h"
#include "key_index.h"
#include "test.h"

using namespace embedstack;

TEST(group_matches_fragments_and_empties) {
  alignas(16) uint8_t ctrl[16];
  for (int i = 0; i < 16; ++i) ctrl[i] = static_cast<uint8_t>(i * 7 % 128);
  ctrl[3] = kCtrlEmpty;
  ctrl[9] = kCtrlDeleted;
  ctrl[10] = 0x05;
  ctrl[11] = 0x05;
  ctrl[12] = 0x05;
  ctrl[13] = kCtrlEmpty;
  ctrl[14] = kCtrlDeleted;
  ctrl[15] = 0x05;
  Group g(ctrl);
  // All 16 bytes are reported (the narrow layout's slots; the wide layout masks free slots to 12).
  uint32_t m = g.match(0x05).raw();
  EXPECT_TRUE(m & (1u << 10));
  EXPECT_TRUE(m & (1u << 11));
  EXPECT_TRUE(m & (1u << 12));
  EXPECT_TRUE(m & (1u << 15));
  EXPECT_EQ(m >> 16, 0u);
  EXPECT_EQ(g.matchEmpty().raw(), (1u << 3) | (1u << 13));
  EXPECT_EQ(g.matchFree().raw(), (1u << 3) | (1u << 9) | (1u << 13) | (1u << 14));
  // Bits the matcher reports must be true matches except (SWAR) the byte just above one.
  for (int i = 0; i < 16; ++i) {
    if (m & (1u << i)) EXPECT_TRUE(ctrl[i] == 0x05 || (i > 0 && ctrl[i - 1] == 0x05));
  }
}

TEST(group_padding_of_the_wide_layout_never_matches_a_fragment_or_empty) {
  // Slots 0..11 hold every fragment in turn; 12..15 are padding (deleted), as KeyIndex keeps them.
  alignas(16) uint8_t ctrl[16];
  for (int f = 0; f < 128; ++f) {
    for (int i = 0; i < 12; ++i) ctrl[i] = static_cast<uint8_t>((f + i) % 128);
    std::memset(ctrl + 12, kCtrlDeleted, 4);
    Group g(ctrl);
    EXPECT_EQ(g.match(static_cast<uint8_t>(f)).raw() >> 12, 0u);
    EXPECT_EQ(g.match(static_cast<uint8_t>((f + 11) % 128)).raw() >> 12, 0u);
    EXPECT_EQ(g.matchEmpty().raw(), 0u);
    EXPECT_EQ(g.matchFree().raw(), 0xf000u);
  }
}

TEST(group_of_all_empty_and_all_full) {
  alignas(16) uint8_t ctrl[16];
  std::memset(ctrl, kCtrlEmpty, 16);
  EXPECT_EQ(Group(ctrl).matchEmpty().raw(), 0xffffu);
  EXPECT_EQ(Group(ctrl).match(0).raw(), 0u);
  std::memset(ctrl, 0x7f, 16);
  EXPECT_EQ(Group(ctrl).matchEmpty().raw(), 0u);
  EXPECT_EQ(Group(ctrl).matchFree().raw(), 0u);
  EXPECT_EQ(Group(ctrl).match(0x7f).raw(), 0xffffu);
}

TEST(narrow_rows_are_read_from_their_three_bytes_inside_the_line) {
  // A group at the very end of a readable page (the next page unreadable, where the OS lets
  // a test say so): reading all 16 rows must not touch a byte past the group's 64.
  uint8_t* page = nullptr;
#ifdef __linux__
  const size_t pageBytes = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* map = mmap(nullptr, 2 * pageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_TRUE(map != MAP_FAILED);
  ASSERT_TRUE(mprotect(static_cast<uint8_t*>(map) + pageBytes, pageBytes, PROT_NONE) == 0);
  page = static_cast<uint8_t*>(map) + pageBytes - kGroupBytes;
#else
  alignas(64) static uint8_t line[kGroupBytes];
  page = line;
#endif
  uint8_t* ctrl = page;
  for (size_t i = 0; i < 16; ++i) ctrl[i] = static_cast<uint8_t>(0x70 + i);  // control bytes: never part of a row
  for (size_t j = 0; j < 16; ++j) {
    // Row j's bytes, low first: distinct in every byte, the top byte set for odd j.
    ctrl[16 + 3 * j] = static_cast<uint8_t>(0x11 * (j + 1));
    ctrl[16 + 3 * j + 1] = static_cast<uint8_t>(0xA0 + j);
    ctrl[16 + 3 * j + 2] = static_cast<uint8_t>((j % 2 ? 0xF0 : 0x00) + j);
  }
  const KeyIndex::View narrow{page, 1, 3, 8};
  for (unsigned j = 0; j < 16; ++j) {
    const uint32_t want = ctrl[16 + 3 * j] | (uint32_t{ctrl[16 + 3 * j + 1]} << 8) | (uint32_t{ctrl[16 + 3 * j + 2]} << 16);
    EXPECT_EQ(narrow.row(ctrl, j), want);
  }
  EXPECT_EQ(narrow.row(ctrl, 15), uint32_t{0x10} | (uint32_t{0xAF} << 8) | (uint32_t{0xFF} << 16));  // bytes 61..63
  // The wide layout: 12 aligned 4-byte rows, the last one the line's last 4 bytes.
  const KeyIndex::View wide{page, 1, 4, 0};
  for (unsigned j = 0; j < 12; ++j) {
    uint32_t want;
    std::memcpy(&want, ctrl + 16 + 4 * j, 4);
    EXPECT_EQ(wide.row(ctrl, j), want);
  }
#ifdef __linux__
  munmap(map, 2 * pageBytes);
#endif
}

namespace {
/** Keys of rows that need no table of keys: row r's key is a fixed bijection of r. */
int64_t keyOfRow(uint32_t r) { return static_cast<int64_t>(hashKey(r) ^ 0x5bd1e995u); }

struct Harness {
  KeyIndex index;
  std::vector<int64_t> keys;  // row -> key
  size_t find(int64_t k) const {
    return index.find(k, hashKey(k), [this](uint32_t r) { return keys[r]; });
  }
  void insert(int64_t k) {
    keys.push_back(k);
    index.insert(hashKey(k), static_cast<uint32_t>(keys.size() - 1));
  }
};

const bool kLayouts[] = {true, false};
}  // namespace

TEST(index_holds_extreme_keys) {
  for (bool narrow : kLayouts) {
    Harness h;
    h.index.reset(1, narrow);
    const int64_t extremes[] = {INT64_MIN, INT64_MAX, -1, 0, int64_t{1} << 40, 1, INT64_MIN + 1};
    for (int64_t k : extremes) {
      EXPECT_EQ(h.find(k), KeyIndex::kNoSlot);
      h.insert(k);
    }
    for (size_t r = 0; r < h.keys.size(); ++r) {
      size_t slot = h.find(h.keys[r]);
      ASSERT_TRUE(slot != KeyIndex::kNoSlot);
      EXPECT_EQ(h.index.rowAt(slot), static_cast<uint32_t>(r));
    }
    EXPECT_EQ(h.find(2), KeyIndex::kNoSlot);
  }
}

TEST(index_full_to_max_load_then_erase_and_reinsert) {
  for (bool narrow : kLayouts) {
    Harness h;
    h.index.reset(8, narrow);  // narrow: 128 slots, 116 entries at max load (14.5 a group); wide: 96, 88 (11)
    const size_t max = narrow ? 116 : 88;
    EXPECT_EQ(h.index.maxEntries(), max);
    std::mt19937_64 rng(42);
    while (h.index.fits(1)) h.insert(static_cast<int64_t>(rng()));
    EXPECT_EQ(h.index.used(), max);
    for (size_t r = 0; r < h.keys.size(); ++r) EXPECT_TRUE(h.find(h.keys[r]) != KeyIndex::kNoSlot);
    // erase every other key; the rest stay findable, erased ones are gone
    for (size_t r = 0; r < h.keys.size(); r += 2) h.index.erase(h.find(h.keys[r]));
    for (size_t r = 0; r < h.keys.size(); ++r) {
      EXPECT_EQ(h.find(h.keys[r]) == KeyIndex::kNoSlot, r % 2 == 0);
    }
    EXPECT_TRUE(h.index.used() + h.index.tombstones() <= max);
    // Inserting again takes tombstones first where the probe meets them; every key is found.
    const size_t tombs = h.index.tombstones();
    size_t added = 0;
    while (h.index.fits(1)) {
      h.insert(static_cast<int64_t>(rng()));
      ++added;
    }
    EXPECT_TRUE(h.index.tombstones() <= tombs);
    for (size_t r = 0; r < h.keys.size(); ++r) EXPECT_EQ(h.find(h.keys[r]) == KeyIndex::kNoSlot, r < max && r % 2 == 0);
    EXPECT_TRUE(added > 0);
  }
}

TEST(index_groups_for_keeps_load_under_max) {
  for (bool narrow : kLayouts) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{13}, size_t{14}, size_t{1000}, size_t{1} << 20, size_t{1} << 24}) {
      const size_t g = KeyIndex::groupsFor(n, narrow);
      KeyIndex index;
      if (n <= 1000) {
        index.reset(g, narrow);
        EXPECT_TRUE(n <= index.maxEntries());
      }
      // After a growth (or presized): 13 keys a 16-slot group (load 0.81), 10 a 12-slot group (0.83).
      EXPECT_EQ(g, n / (narrow ? 13 : 10) + 1);
      EXPECT_TRUE(n <= g * (narrow ? 29 : 22) / 2);
      if (n >= 1000) EXPECT_TRUE(static_cast<double>(n) / static_cast<double>(g * (narrow ? 16 : 12)) >= 0.8);
    }
  }
}

TEST(index_many_random_keys_against_a_set) {
  for (bool narrow : kLayouts) {
    Harness h;
    const size_t n = 50000;
    h.index.reset(KeyIndex::groupsFor(n, narrow), narrow);
    std::mt19937_64 rng(7);
    std::unordered_set<int64_t> set;
    while (set.size() < n) {
      int64_t k = static_cast<int64_t>(rng());
      if (set.insert(k).second) h.insert(k);
    }
    size_t lost = 0;
    for (size_t r = 0; r < h.keys.size(); ++r) {
      const size_t slot = h.find(h.keys[r]);
      lost += slot == KeyIndex::kNoSlot || h.index.rowAt(slot) != r;
    }
    EXPECT_EQ(lost, size_t{0});
    size_t misses = 0;
    for (int i = 0; i < 10000; ++i) {
      int64_t k = static_cast<int64_t>(rng());
      if (!set.count(k))
        misses += h.find(k) == KeyIndex::kNoSlot;
      else
        misses += 1;
    }
    EXPECT_EQ(misses, size_t{10000});
  }
}

// Every slot position of a narrow group, rows whose 3 bytes all differ (up to 2^24 - 1), the
// last slot's row ending at the line's last byte: each stored, read back, rewritten, erased
// and found again, and no store touching a neighbour's row or the next group's control bytes.
TEST(narrow_index_every_slot_position_and_rows_up_to_2_pow_24_minus_1) {
  KeyIndex index;
  index.reset(2, true);  // 29 entries: group 0's 16 slots, then 13 more in group 1
  ASSERT_TRUE(index.narrow());
  // Keys whose home group is 0 (fill its 16 slots in order) and 1.
  std::vector<uint32_t> rows;
  std::vector<int64_t> home0, home1;
  const uint32_t special[] = {0, 1, 0xFFFFFF, 0x800000, 0x7FFFFF, 0xFFFFFE, 0x00FF00, 0xFF00FF, 0x010203, 0xABCDEF};
  std::map<uint32_t, int64_t> keyOf;
  auto key = [&](uint32_t r) { return keyOf.at(r); };
  std::mt19937_64 rng(11);
  for (size_t j = 0; j < 16; ++j) rows.push_back(j < 10 ? special[j] : static_cast<uint32_t>(rng() % KeyIndex::kNarrowRows));
  for (size_t j = 0; j < 13; ++j) rows.push_back(static_cast<uint32_t>(0x100000 + j * 0x0F0F01));
  // Distinct rows: give each its own key with the wanted home group.
  for (size_t i = 0; i < rows.size(); ++i) {
    for (;;) {
      const int64_t k = static_cast<int64_t>(rng());
      if (hashGroup(hashKey(k), 2) == (i < 16 ? 0u : 1u)) {
        keyOf[rows[i]] = k;
        break;
      }
    }
  }
  ASSERT_TRUE(keyOf.size() == rows.size());
  const auto findSlot = [&](uint32_t r) { return index.find(key(r), hashKey(key(r)), key); };
  for (size_t i = 0; i < rows.size(); ++i) {
    const size_t slot = index.insert(hashKey(key(rows[i])), rows[i]);
    // Group 0's slots 0..15 in turn, then group 1's (slot = group * 16 + position).
    EXPECT_EQ(slot, i);
  }
  EXPECT_TRUE(!index.fits(1));
  const auto allRead = [&]() {
    size_t bad = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const size_t slot = findSlot(rows[i]);
      bad += slot != i || index.rowAt(slot) != rows[i];
    }
    return bad;
  };
  EXPECT_EQ(allRead(), size_t{0});
  // Rewrite each slot with its row's complement (within 24 bits), then back: neighbours untouched.
  for (size_t i = 0; i < rows.size(); ++i) {
    index.setRow(i, 0xFFFFFF ^ rows[i]);
    for (size_t o = 0; o < rows.size(); ++o) EXPECT_EQ(index.rowAt(o), o == i ? (0xFFFFFF ^ rows[i]) : rows[o]);
    index.setRow(i, rows[i]);
  }
  EXPECT_EQ(allRead(), size_t{0});
  // A row past 24 bits is refused (the table switches layouts before it could happen).
  EXPECT_THROW_CODE(index.setRow(3, 0x1000000), kInternal);
  EXPECT_EQ(index.rowAt(3), rows[3]);
  // Erase in the full group 0: tombstones (a probe may pass through it), found again after reinsertion.
  const size_t before = index.tombstones();
  index.erase(findSlot(rows[15]));
  index.erase(findSlot(rows[0]));
  EXPECT_EQ(index.tombstones(), before + 2);
  EXPECT_EQ(findSlot(rows[15]), KeyIndex::kNoSlot);
  EXPECT_EQ(findSlot(rows[0]), KeyIndex::kNoSlot);
  // Group 1's keys behind group 0's still found (group 1 is not full: its erase leaves it empty).
  index.erase(findSlot(rows[16]));
  EXPECT_EQ(index.tombstones(), before + 2);
  EXPECT_EQ(findSlot(rows[16]), KeyIndex::kNoSlot);
  for (size_t i = 1; i < 15; ++i) EXPECT_EQ(findSlot(rows[i]), i);
  for (size_t i = 17; i < rows.size(); ++i) EXPECT_EQ(findSlot(rows[i]), i);
  // Reinserted: the tombstones of group 0 are taken first (lowest: slot 0, then 15).
  EXPECT_EQ(index.insert(hashKey(key(rows[15])), rows[15]), size_t{0});
  EXPECT_EQ(index.insert(hashKey(key(rows[0])), rows[0]), size_t{15});
  EXPECT_EQ(index.tombstones(), before);
  EXPECT_EQ(index.rowAt(0), rows[15]);
  EXPECT_EQ(index.rowAt(15), rows[0]);
  EXPECT_EQ(index.rowAt(14), rows[14]);
  EXPECT_EQ(findSlot(rows[16]), KeyIndex::kNoSlot);
  // clear: every slot empty, the layout and size kept; the same rows go in again.
  index.clear();
  EXPECT_TRUE(index.narrow());
  EXPECT_EQ(index.used(), size_t{0});
  EXPECT_EQ(index.tombstones(), size_t{0});
  for (uint32_t r : rows) EXPECT_EQ(findSlot(r), KeyIndex::kNoSlot);
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(index.insert(hashKey(key(rows[i])), rows[i]), i);
  EXPECT_EQ(allRead(), size_t{0});
}

TEST(narrow_index_refuses_a_row_past_24_bits_and_the_wide_one_holds_it) {
  KeyIndex narrow;
  narrow.reset(4, true);
  EXPECT_THROW_CODE(narrow.insert(hashKey(7), 0x1000000), kInternal);
  EXPECT_EQ(narrow.used(), size_t{0});
  KeyIndex wide;
  wide.reset(4, false);
  for (uint32_t r : {uint32_t{0x1000000}, uint32_t{0xFFFFFFFE}, uint32_t{0xFFFFFF}}) {
    const size_t slot = wide.insert(hashKey(keyOfRow(r)), r);
    EXPECT_EQ(wide.rowAt(slot), r);
    EXPECT_EQ(wide.find(keyOfRow(r), hashKey(keyOfRow(r)), keyOfRow), slot);
  }
}

// Many rows near the top of the narrow range (keys computed from rows: no 2^24-entry key
// table), rebuilt into a fresh index of each layout as the table rebuilds.
TEST(narrow_index_rows_near_2_pow_24_rebuilt_in_both_layouts) {
  std::vector<uint32_t> rows;
  for (uint32_t r = 0; r < 3000; ++r) rows.push_back(static_cast<uint32_t>(KeyIndex::kNarrowRows - 1 - r * 5));
  for (uint32_t r = 0; r < 1000; ++r) rows.push_back(r);
  for (bool narrow : kLayouts) {
    KeyIndex index;
    index.reset(KeyIndex::groupsFor(rows.size(), narrow), narrow);
    for (uint32_t r : rows) index.insert(hashKey(keyOfRow(r)), r);
    size_t bad = 0;
    for (uint32_t r : rows) {
      const size_t slot = index.find(keyOfRow(r), hashKey(keyOfRow(r)), keyOfRow);
      bad += slot == KeyIndex::kNoSlot || index.rowAt(slot) != r;
      const KeyIndex::View v = index.view();
      const uint64_t h = hashKey(keyOfRow(r));
      bad += v.findRow(keyOfRow(r), hashFragment(h), v.homeGroup(h), keyOfRow) != r;
    }
    EXPECT_EQ(bad, size_t{0});
    // Absent keys (rows never inserted) are not found.
    size_t found = 0;
    for (uint32_t r = 1000; r < 2000; ++r) found += index.find(keyOfRow(r), hashKey(keyOfRow(r)), keyOfRow) != KeyIndex::kNoSlot;
    EXPECT_EQ(found, size_t{0});
    // Half erased (every other), the rest found with their rows.
    for (size_t i = 0; i < rows.size(); i += 2) index.erase(index.find(keyOfRow(rows[i]), hashKey(keyOfRow(rows[i])), keyOfRow));
    bad = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const size_t slot = index.find(keyOfRow(rows[i]), hashKey(keyOfRow(rows[i])), keyOfRow);
      bad += i % 2 == 0 ? slot != KeyIndex::kNoSlot : (slot == KeyIndex::kNoSlot || index.rowAt(slot) != rows[i]);
    }
    EXPECT_EQ(bad, size_t{0});
  }
}
