// Slurm's node lists and task counts per node (tnt/core/slurm.h), in every form srun, salloc and
// sbatch print.
#include "tnt/core/slurm.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tnt/core/error.h"

namespace {

using Names = std::vector<std::string>;

TEST(SlurmNodeList, PlainNamesAndLists) {
  EXPECT_EQ(tnt::expand_slurm_nodelist("cn7"), Names{"cn7"});
  EXPECT_EQ(tnt::expand_slurm_nodelist("a,b.example.org,c-1"), (Names{"a", "b.example.org", "c-1"}));
}

TEST(SlurmNodeList, RangesListsOfRangesAndLeadingZeros) {
  EXPECT_EQ(tnt::expand_slurm_nodelist("node[01-03,7],gpu1"), (Names{"node01", "node02", "node03", "node7", "gpu1"}));
  EXPECT_EQ(tnt::expand_slurm_nodelist("n[1-2,5,8-9]"), (Names{"n1", "n2", "n5", "n8", "n9"}));
  EXPECT_EQ(tnt::expand_slurm_nodelist("n[008-011]"), (Names{"n008", "n009", "n010", "n011"}));
  EXPECT_EQ(tnt::expand_slurm_nodelist("r[8-10]x"), (Names{"r8x", "r9x", "r10x"}));  // width as written
  EXPECT_EQ(tnt::expand_slurm_nodelist("[1-2]"), (Names{"1", "2"}));
}

TEST(SlurmNodeList, SeveralBracketGroupsGiveEveryCombination) {
  EXPECT_EQ(tnt::expand_slurm_nodelist("a[1-2]-ib[3,5]"), (Names{"a1-ib3", "a1-ib5", "a2-ib3", "a2-ib5"}));
  EXPECT_EQ(tnt::expand_slurm_nodelist("rack[1-2]n[01-02],login"),
            (Names{"rack1n01", "rack1n02", "rack2n01", "rack2n02", "login"}));
  EXPECT_EQ(tnt::expand_slurm_nodelist("x[1]y[2]z[3]"), Names{"x1y2z3"});
}

TEST(SlurmNodeList, MalformedListsAreRefusedByName) {
  for (const char* bad : {"", ",", "n[1-", "n]1[", "n[3-1]", "n[]", "n[a-b]", "n[1-2-3]", "n[[1]]", "n[-1]", "a b"}) {
    try {
      tnt::expand_slurm_nodelist(bad, "SLURM_STEP_NODELIST");
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const tnt::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("SLURM_STEP_NODELIST"), std::string::npos) << e.what();
    }
  }
}

TEST(SlurmNodeList, ProductsOfGroupsAreBoundedToo) {
  EXPECT_THROW(tnt::expand_slurm_nodelist("a[1-1000]b[1-1000]"), tnt::ConfigError);
  EXPECT_EQ(tnt::expand_slurm_nodelist("a[1-100]b[1-1000]").size(), 100000u);
}

TEST(SlurmTasksPerNode, Forms) {
  EXPECT_EQ(tnt::expand_slurm_tasks_per_node("4"), std::vector<int>{4});
  EXPECT_EQ(tnt::expand_slurm_tasks_per_node("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(tnt::expand_slurm_tasks_per_node("1,3(x2)"), (std::vector<int>{1, 3, 3}));
  for (const char* bad : {"", "0", "x", "2(x0)", "2(x", "2(3)", "2,,1", "-1"}) {
    EXPECT_THROW(tnt::expand_slurm_tasks_per_node(bad), tnt::ConfigError) << bad;
  }
}

}  // namespace
