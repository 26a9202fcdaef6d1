// The console prefix of worker lines: mgtrain's default and torch's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE.
#include <catch2/catch.hpp>

#include "output/line_prefix.hpp"
#include "util/error.hpp"

using namespace mgtrain;

namespace {
const PrefixFields kWorker{"default", 5, 1, "node7"};
const std::string kSource = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE (environment)";

std::string render(const std::string& text) { return LinePrefix::from_template(text, "T").render(kWorker); }
}  // namespace

TEST_CASE("without a template the prefix is mgtrain's [rank N]", "[prefix]") {
  CHECK(LinePrefix().render(kWorker) == "[rank 5] ");
  CHECK(LinePrefix::from_setting(std::nullopt, kSource).render(kWorker) == "[rank 5] ");
  CHECK_FALSE(LinePrefix::from_setting("", kSource).is_template());  // torch: an empty template is no template
}

TEST_CASE("the template is rendered as torch's string.Template safe_substitute does, used as written", "[prefix]") {
  CHECK(render("[${role_name}${local_rank}]:") == "[default1]:");  // torchrun's own default, no space added
  CHECK(render("${hostname}:${rank}: ") == "node7:5: ");
  CHECK(render("$rank|$local_rank|$role_name") == "5|1|default");  // unbraced names end at a non-identifier
  CHECK(render("cost $$5 ") == "cost $5 ");                        // $$ is one $
  CHECK(render("a$ b$") == "a$ b$");                               // a $ that starts nothing stays
  CHECK(render("r$1") == "r$1");
  CHECK(render("").empty());
  CHECK(LinePrefix::from_setting("<${rank}> ", kSource).render(kWorker) == "<5> ");
}

TEST_CASE("an unknown placeholder or an unclosed brace is a usage error naming the variable", "[prefix]") {
  CHECK_THROWS_AS(LinePrefix::from_setting("${rnak}", kSource), UsageError);
  CHECK_THROWS_WITH(LinePrefix::from_setting("[${rnak}] ", kSource),
                    Catch::Contains("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE") &&
                        Catch::Contains("unknown placeholder ${rnak}") && Catch::Contains("did you mean rank"));
  CHECK_THROWS_WITH(render("$ranks "), Catch::Contains("unknown placeholder $ranks"));
  CHECK_THROWS_WITH(render("${rank "), Catch::Contains("offset 0") && Catch::Contains("$$ for a literal $"));
  CHECK_THROWS_WITH(render("x${}"), Catch::Contains("offset 1"));
}

TEST_CASE("torchrun's console prefixes teed streams only, with the template or [role local_rank]:", "[prefix]") {
  const PrefixFields trainer{"trainer", 3, 1, "node7"};
  const LinePrefix none;
  const LinePrefix ranks = LinePrefix::from_template("<${role_name}:${rank}:${local_rank}>", "T");
  // mgtrain's console: every line, teed or not.
  CHECK(console_prefix(none, false, false, trainer) == "[rank 3] ");
  CHECK(console_prefix(none, false, true, trainer) == "[rank 3] ");
  CHECK(console_prefix(ranks, false, false, trainer) == "<trainer:3:1>");
  // torchrun's: as written unless teed; the template replaces the header only on teed streams.
  CHECK(console_prefix(none, true, false, trainer).empty());
  CHECK(console_prefix(none, true, true, trainer) == "[trainer1]:");
  CHECK(console_prefix(ranks, true, false, trainer).empty());
  CHECK(console_prefix(ranks, true, true, trainer) == "<trainer:3:1>");
}
