#pragma once
// An SVG scatter plot of policy configurations: x = mean |active| (fewer is cheaper),
// y = mean retained gate mass (more is closer to vanilla). One <circle class="point"> per
// configuration, coloured by grid, with its policy text as a tooltip; the Pareto frontier
// (no other point has both fewer experts and more mass) joined by a line.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace moe_route {

struct plot_point {
  std::string label;  ///< the policy text
  int series = 0;     ///< which grid it came from
  double active = 0;
  double retained = 0;
  bool pareto = false;
};

/// Marks the points no other point dominates (<= active and >= mass, one strictly).
inline void mark_pareto(std::vector<plot_point>& points) {
  for (auto& p : points) {
    p.pareto = std::none_of(points.begin(), points.end(), [&](const plot_point& q) {
      return q.active <= p.active && q.retained >= p.retained && (q.active < p.active || q.retained > p.retained);
    });
  }
}

inline std::string xml_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

/// "Nice" tick positions covering [lo, hi].
inline std::vector<double> ticks(double lo, double hi, int target = 6) {
  const double span = std::max(hi - lo, 1e-9);
  const double raw = span / target, magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  }
  std::vector<double> out;
  for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9; t += step) out.push_back(t);
  return out;
}

inline std::string pareto_svg(const std::vector<plot_point>& points, const std::vector<std::string>& series_names,
                              const std::string& title) {
  const double width = 860, height = 540, left = 80, right = 240, top = 50, bottom = 70;
  double x_lo = 1e300, x_hi = -1e300, y_lo = 1e300, y_hi = -1e300;
  for (const auto& p : points) {
    x_lo = std::min(x_lo, p.active);
    x_hi = std::max(x_hi, p.active);
    y_lo = std::min(y_lo, p.retained);
    y_hi = std::max(y_hi, p.retained);
  }
  const double x_pad = std::max(0.5, (x_hi - x_lo) * 0.05), y_pad = std::max(0.005, (y_hi - y_lo) * 0.05);
  x_lo = std::max(0.0, x_lo - x_pad);
  x_hi += x_pad;
  y_lo -= y_pad;
  y_hi = std::min(1.0 + y_pad, y_hi + y_pad);
  auto sx = [&](double x) { return left + (x - x_lo) / (x_hi - x_lo) * (width - left - right); };
  auto sy = [&](double y) { return height - bottom - (y - y_lo) / (y_hi - y_lo) * (height - top - bottom); };
  static const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

  std::string svg;
  char buffer[512];
  auto add = [&](const char* format, auto... values) {
    std::snprintf(buffer, sizeof buffer, format, values...);
    svg += buffer;
  };
  add("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n", width, height, width, height);
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + std::to_string(static_cast<int>(left)) + "\" y=\"28\" font-size=\"16\" font-weight=\"bold\">" +
         xml_escape(title) + "</text>\n";
  for (const double t : ticks(x_lo, x_hi)) {
    add("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", sx(t), top, sx(t), height - bottom);
    add("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", sx(t), height - bottom + 18, t);
  }
  for (const double t : ticks(y_lo, y_hi)) {
    add("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", left, sy(t), width - right, sy(t));
    add("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", left - 8, sy(t) + 4, t);
  }
  add("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n", left, top,
      width - left - right, height - top - bottom);
  add("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">mean active experts per layer and step (fewer = faster)</text>\n",
      (left + width - right) / 2, height - 25);
  add("<text transform=\"translate(22 %.1f) rotate(-90)\" text-anchor=\"middle\">mean retained gate mass (1 = vanilla)</text>\n",
      (top + height - bottom) / 2);

  std::vector<plot_point> frontier;
  for (const auto& p : points) if (p.pareto) frontier.push_back(p);
  std::sort(frontier.begin(), frontier.end(), [](const auto& a, const auto& b) { return a.active < b.active; });
  if (frontier.size() > 1) {
    svg += "<polyline class=\"frontier\" fill=\"none\" stroke=\"#555\" stroke-dasharray=\"5 3\" points=\"";
    for (const auto& p : frontier) add("%.1f,%.1f ", sx(p.active), sy(p.retained));
    svg += "\"/>\n";
  }
  for (const auto& p : points) {
    add("<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\" fill-opacity=\"0.8\" stroke=\"%s\">", sx(p.active),
        sy(p.retained), p.pareto ? 6 : 4, colours[p.series % 8], p.pareto ? "black" : "none");
    add("<title>%s: |active| %.2f, retained %.4f</title></circle>\n", xml_escape(p.label).c_str(), p.active, p.retained);
  }
  for (std::size_t s = 0; s < series_names.size(); ++s) {
    const double y = top + 10 + 20.0 * static_cast<double>(s);
    add("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"/>\n", width - right + 20, y, colours[s % 8]);
    svg += "<text x=\"" + std::to_string(static_cast<int>(width - right + 32)) + "\" y=\"" + std::to_string(static_cast<int>(y + 4)) +
           "\">" + xml_escape(series_names[s]) + "</text>\n";
  }
  add("<text x=\"%.1f\" y=\"%.1f\" fill=\"#555\">outlined, dashed: Pareto frontier</text>\n", width - right + 14,
      top + 20.0 + 20.0 * static_cast<double>(series_names.size()));
  svg += "</svg>\n";
  return svg;
}

}  // namespace moe_route
