// report.md and report.html (ab_report.h).
#include "ab_report.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <sstream>

#include "ftcore/atomic_file.h"

namespace fs = std::filesystem;

namespace ftcore::ab {

namespace {

std::string fmt(double v, int digits = 4);

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

// A number of summary.json: a JSON number, or "inf"/"-inf"/"nan" (ab_summary.cpp).
double value_of(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) return j == "inf" ? HUGE_VAL : j == "-inf" ? -HUGE_VAL : std::nan("");
  return std::nan("");
}

std::string fmt(const nlohmann::json& j, int digits = 4) { return fmt(value_of(j), digits); }

std::string fmt(double v, int digits) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  std::ostringstream o;
  o << std::setprecision(digits) << v;
  return o.str();
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::vector<std::string> arm_names(const nlohmann::json& s) {
  std::vector<std::string> names;
  for (const auto& a : s["experiment"]["arms"]) names.push_back(a["name"].get<std::string>());
  return names;
}

// Plot frame mapping data to a W x H pixel box with margins.
struct Frame {
  double x0, x1, y0, y1;
  double W = 640, H = 300, left = 60, right = 20, top = 20, bottom = 40;
  double px(double x) const { return left + (x - x0) / std::max(x1 - x0, 1e-12) * (W - left - right); }
  double py(double y) const { return H - bottom - (y - y0) / std::max(y1 - y0, 1e-12) * (H - top - bottom); }
  std::string axes(const std::string& xlabel, const std::string& ylabel) const {
    std::ostringstream o;
    o << "<line x1='" << left << "' y1='" << H - bottom << "' x2='" << W - right << "' y2='" << H - bottom << "' stroke='#333'/>"
      << "<line x1='" << left << "' y1='" << top << "' x2='" << left << "' y2='" << H - bottom << "' stroke='#333'/>";
    for (int i = 0; i <= 4; ++i) {
      const double y = y0 + (y1 - y0) * i / 4.0, x = x0 + (x1 - x0) * i / 4.0;
      o << "<text x='" << left - 5 << "' y='" << py(y) + 4 << "' font-size='10' text-anchor='end'>" << fmt(y, 3) << "</text>"
        << "<text x='" << px(x) << "' y='" << H - bottom + 14 << "' font-size='10' text-anchor='middle'>" << fmt(x, 3) << "</text>";
    }
    o << "<text x='" << (left + W - right) / 2 << "' y='" << H - 6 << "' font-size='11' text-anchor='middle'>" << xlabel << "</text>"
      << "<text x='12' y='" << (top + H - bottom) / 2 << "' font-size='11' text-anchor='middle' transform='rotate(-90 12 "
      << (top + H - bottom) / 2 << ")'>" << ylabel << "</text>";
    return o.str();
  }
};

std::string svg_open(const Frame& f) {
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << f.W << "' height='" << f.H << "' viewBox='0 0 " << f.W << " "
    << f.H << "'>";
  return o.str();
}

// Mean eval-loss curve per arm over seeds, with a min-max band.
std::string curves_svg(const nlohmann::json& s) {
  std::map<std::string, std::map<double, std::vector<double>>> by_arm;
  Frame f{std::numeric_limits<double>::max(), -std::numeric_limits<double>::max(),
          std::numeric_limits<double>::max(), -std::numeric_limits<double>::max()};
  for (const auto& r : s["runs"])
    for (const auto& p : r["eval_loss_curve"]) {
      const double x = p[0].get<double>(), y = p[1].get<double>();
      by_arm[r["arm"].get<std::string>()][x].push_back(y);
      f.x0 = std::min(f.x0, x), f.x1 = std::max(f.x1, x), f.y0 = std::min(f.y0, y), f.y1 = std::max(f.y1, y);
    }
  if (by_arm.empty()) return "<p>No evaluation curves (the runs have no validation set).</p>";
  std::ostringstream o;
  o << svg_open(f) << f.axes("step", "eval loss");
  const auto names = arm_names(s);
  for (size_t a = 0; a < names.size(); ++a) {
    const auto& points = by_arm[names[a]];
    if (points.empty()) continue;
    std::ostringstream upper, lower, mean;
    for (const auto& [x, ys] : points) {
      double sum = 0;
      for (double y : ys) sum += y;
      upper << f.px(x) << "," << f.py(*std::max_element(ys.begin(), ys.end())) << " ";
      mean << f.px(x) << "," << f.py(sum / static_cast<double>(ys.size())) << " ";
    }
    for (auto it = points.rbegin(); it != points.rend(); ++it)
      lower << f.px(it->first) << "," << f.py(*std::min_element(it->second.begin(), it->second.end())) << " ";
    const char* color = kColors[a % 8];
    o << "<polygon points='" << upper.str() << lower.str() << "' fill='" << color << "' fill-opacity='0.18' stroke='none'/>"
      << "<polyline points='" << mean.str() << "' fill='none' stroke='" << color << "' stroke-width='2'/>"
      << "<text x='" << f.W - f.right - 4 << "' y='" << f.top + 14 * (a + 1) << "' font-size='11' text-anchor='end' fill='"
      << color << "'>" << escape(names[a]) << "</text>";
  }
  return o.str() + "</svg>";
}

// Per-seed paired deltas of the primary metric per arm, mean and CI.
std::string deltas_svg(const nlohmann::json& s) {
  const std::string metric = s["experiment"]["metric"].get<std::string>();
  if (!s["statistics"].contains(metric)) return "<p>No paired values of " + escape(metric) + ".</p>";
  const auto& stats = s["statistics"][metric];
  Frame f{-0.5, static_cast<double>(stats.size()) - 0.5, 0.0, 0.0};
  for (auto& [arm, c] : stats.items()) {
    for (double d : c["deltas"]) f.y0 = std::min(f.y0, d), f.y1 = std::max(f.y1, d);
    for (const auto& end : c["ci95"])
      if (std::isfinite(value_of(end))) f.y0 = std::min(f.y0, value_of(end)), f.y1 = std::max(f.y1, value_of(end));
  }
  if (f.y1 - f.y0 < 1e-12) f.y0 -= 1, f.y1 += 1;
  std::ostringstream o;
  o << svg_open(f) << f.axes("arm", "delta vs control: " + escape(metric));
  o << "<line x1='" << f.left << "' y1='" << f.py(0) << "' x2='" << f.W - f.right << "' y2='" << f.py(0)
    << "' stroke='#999' stroke-dasharray='4 3'/>";
  // Arms in experiment order, each in its colour of the curves plot.
  const auto names = arm_names(s);
  size_t i = 0;
  for (size_t a = 1; a < names.size(); ++a) {
    if (!stats.contains(names[a])) continue;
    const auto& c = stats[names[a]];
    const double x = f.px(static_cast<double>(i));
    const char* color = kColors[a % 8];
    const double low = std::max(f.y0, value_of(c["ci95"][0])), high = std::min(f.y1, value_of(c["ci95"][1]));
    if (std::isfinite(low) && std::isfinite(high))
      o << "<line x1='" << x + 14 << "' y1='" << f.py(low) << "' x2='" << x + 14 << "' y2='" << f.py(high)
        << "' stroke='" << color << "' stroke-width='3'/>";
    o << "<circle cx='" << x + 14 << "' cy='" << f.py(value_of(c["mean_delta"])) << "' r='5' fill='" << color << "'/>";
    size_t k = 0;
    for (double d : c["deltas"])
      o << "<circle cx='" << x - 14 + 4.0 * static_cast<double>(k++ % 5) << "' cy='" << f.py(d) << "' r='3' fill='none' stroke='"
        << color << "'/>";
    o << "<text x='" << x << "' y='" << f.top + 12 + 14.0 * static_cast<double>(i % 2) << "' font-size='11' text-anchor='middle' fill='"
      << color << "'>" << escape(names[a]) << ": " << escape(c["verdict"].get<std::string>()) << "</text>";
    ++i;
  }
  return o.str() + "</svg>";
}

std::string table_md(const nlohmann::json& s) {
  std::ostringstream o;
  o << "| metric | arm | mean delta | 95% CI (BCa) | t p | Wilcoxon p | Holm p | P(improve) | d_z | MDE | verdict |\n"
    << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (auto& [metric, arms] : s["statistics"].items())
    for (auto& [arm, c] : arms.items())
      o << "| " << metric << " | " << arm << " | " << fmt(c["mean_delta"]) << " | [" << fmt(c["ci95"][0]) << ", "
        << fmt(c["ci95"][1]) << "] | " << fmt(c["t_p_value"], 3) << " | " << fmt(c["wilcoxon_p_value"], 3) << " | "
        << fmt(c["holm_p_value"], 3) << " | " << fmt(c["probability_of_improvement"], 3) << " | " << fmt(c["cohens_dz"], 3)
        << " | " << fmt(c["minimum_detectable_effect"], 3) << " | " << c["verdict"].get<std::string>() << " |\n";
  return o.str();
}

std::string differences_md(const nlohmann::json& s) {
  std::ostringstream o;
  const auto names = arm_names(s);
  o << "| key |";
  for (const auto& n : names) o << " " << n << " |";
  o << "\n|---|";
  for (size_t i = 0; i < names.size(); ++i) o << "---|";
  o << "\n";
  for (auto& [key, values] : s["arm_differences"].items()) {
    o << "| `" << key << "` |";
    for (const auto& v : values) o << " `" << v.get<std::string>() << "` |";
    o << "\n";
  }
  return o.str();
}

// A small Markdown-table-to-HTML conversion for the report's own tables.
std::string table_html(const std::string& md) {
  std::istringstream in(md);
  std::string line, out = "<table>";
  bool header = true;
  while (std::getline(in, line)) {
    if (line.rfind("|---", 0) == 0) continue;
    out += "<tr>";
    std::istringstream cells(line.substr(1));
    std::string cell;
    while (std::getline(cells, cell, '|')) {
      cell.erase(std::remove(cell.begin(), cell.end(), '`'), cell.end());
      out += std::string(header ? "<th>" : "<td>") + escape(cell) + (header ? "</th>" : "</td>");
    }
    out += "</tr>";
    header = false;
  }
  return out + "</table>";
}

}  // namespace

void write_reports(const fs::path& dir, const nlohmann::json& s) {
  const std::string metric = s["experiment"]["metric"].get<std::string>();
  std::ostringstream verdicts;
  for (auto& [arm, v] : s["verdicts"].items())
    verdicts << "- **" << arm << "** vs " << s["experiment"]["control"].get<std::string>() << ": " << v.get<std::string>()
             << " (" << metric << ")\n";
  std::ostringstream provenance;
  provenance << "ftcore " << s["provenance"]["ftcore"].get<std::string>() << ", libtorch "
             << s["provenance"]["libtorch"].get<std::string>() << ", " << s["provenance"]["machine"].get<std::string>() << "\n";
  for (const auto& l : s["provenance"]["lock"]) provenance << "\n    " << l.get<std::string>();
  std::ostringstream md;
  md << "# A/B experiment\n\nControl: " << s["experiment"]["control"].get<std::string>() << "; seeds "
     << s["experiment"]["seeds"].dump() << "; primary metric " << metric
     << "; 95% CIs by BCa bootstrap (10,000 resamples, seeded); p-values Holm-adjusted across arms.\n\n"
     << verdicts.str() << "\n## Statistics\n\n" << table_md(s) << "\n## Arms differ in\n\n" << differences_md(s)
     << "\n## Provenance\n\n" << provenance.str() << "\n";
  write_file_atomically(dir / "report.md", md.str());

  std::ostringstream html;
  html << "<!DOCTYPE html><html><head><meta charset='utf-8'><title>ftcore ab report</title><style>"
       << "body{font-family:sans-serif;margin:24px;max-width:1100px}table{border-collapse:collapse;font-size:12px}"
       << "td,th{border:1px solid #ccc;padding:3px 6px}th{background:#f3f3f3}pre{font-size:11px;background:#f7f7f7;padding:8px}"
       << "</style></head><body><h1>A/B experiment</h1><p>Control <b>" << escape(s["experiment"]["control"].get<std::string>())
       << "</b>, seeds " << escape(s["experiment"]["seeds"].dump()) << ", primary metric <b>" << escape(metric) << "</b>.</p><ul>";
  for (auto& [arm, v] : s["verdicts"].items()) html << "<li><b>" << escape(arm) << "</b>: " << escape(v.get<std::string>()) << "</li>";
  html << "</ul><h2>Eval loss per arm (mean over seeds, min-max band)</h2>" << curves_svg(s)
       << "<h2>Paired deltas per seed, mean and 95% CI</h2>" << deltas_svg(s) << "<h2>Statistics</h2>" << table_html(table_md(s))
       << "<h2>Arms differ in</h2>" << table_html(differences_md(s)) << "<h2>Provenance</h2><pre>" << escape(provenance.str())
       << "</pre></body></html>\n";
  write_file_atomically(dir / "report.html", html.str());
}

}  // namespace ftcore::ab
