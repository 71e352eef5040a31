#pragma once
// An SVG scatter plot of policy configurations: x = mean |active| (fewer is cheaper),
// y = mean retained gate mass (more is closer to vanilla). One <circle class="point"> per
// configuration, coloured by grid, with its policy text as a tooltip and its ranged
// parameters written beside it (<text class="label">, readable in any viewer and in
// print); the Pareto frontier (no other point has both fewer experts and more mass)
// joined by a line.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <range/v3/algorithm/none_of.hpp>
#include <range/v3/algorithm/sort.hpp>
#include <range/v3/range/conversion.hpp>
#include <range/v3/view/enumerate.hpp>
#include <range/v3/view/filter.hpp>

namespace moe_route {

struct plot_point {
  std::string label;  ///< the policy text (the tooltip)
  std::string tag;    ///< a short label written beside the point ("k0=3"); none when empty
  int series = 0;     ///< which grid it came from
  double active = 0;
  double retained = 0;
  bool pareto = false;
};

/// Whether `q` is at least as good as `p` on both axes and better on one.
inline bool dominates(const plot_point& q, const plot_point& p) {
  return q.active <= p.active && q.retained >= p.retained && (q.active < p.active || q.retained > p.retained);
}

/// Marks the points no other point dominates (<= active and >= mass, one strictly).
inline void mark_pareto(std::vector<plot_point>& points) {
  for (auto& p : points) {
    p.pareto = ranges::none_of(points, [&](const plot_point& q) { return dominates(q, p); });
  }
}

inline std::string xml_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
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

/// Where things go, in pixels: the picture's size and the edges of the plotting area
/// inside it (the legend takes the margin to the right of the area).
struct plot_layout {
  static constexpr double width = 860, height = 540;
  static constexpr double left = 80, right = width - 240, top = 50, bottom = height - 70;
};

/// The data ranges the axes show and where a data point lands in the picture.
struct plot_frame {
  double x_lo = 1e300, x_hi = -1e300, y_lo = 1e300, y_hi = -1e300;

  double x(double active) const {
    using layout = plot_layout;
    return layout::left + (active - x_lo) / (x_hi - x_lo) * (layout::right - layout::left);
  }
  double y(double retained) const {
    using layout = plot_layout;
    return layout::bottom - (retained - y_lo) / (y_hi - y_lo) * (layout::bottom - layout::top);
  }
};

/// The points' extent, padded so that none sits on the border; |active| stays >= 0 and
/// the mass axis ends a pad above 1 at most.
inline plot_frame frame_around(const std::vector<plot_point>& points) {
  plot_frame frame;
  for (const auto& p : points) {
    frame.x_lo = std::min(frame.x_lo, p.active);
    frame.x_hi = std::max(frame.x_hi, p.active);
    frame.y_lo = std::min(frame.y_lo, p.retained);
    frame.y_hi = std::max(frame.y_hi, p.retained);
  }
  const double x_pad = std::max(0.5, (frame.x_hi - frame.x_lo) * 0.05);
  const double y_pad = std::max(0.005, (frame.y_hi - frame.y_lo) * 0.05);
  frame.x_lo = std::max(0.0, frame.x_lo - x_pad);
  frame.x_hi += x_pad;
  frame.y_lo -= y_pad;
  frame.y_hi = std::min(1.0 + y_pad, frame.y_hi + y_pad);
  return frame;
}

/// One colour per grid, repeating after eight.
inline const char* series_colour(std::size_t series) {
  static const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                  "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};
  return colours[series % 8];
}

/// Appends printf-formatted text to `svg`. One element at a time, each shorter than the
/// buffer (a longer one is cut, as snprintf does).
template <class... Values>
void append_formatted(std::string& svg, const char* format, Values... values) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, format, values...);
  svg += buffer;
}

/// The opening tag, the white background and the title.
inline void append_heading(std::string& svg, const std::string& title) {
  using layout = plot_layout;
  append_formatted(svg,
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                   "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
                   layout::width, layout::height, layout::width, layout::height);
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + std::to_string(static_cast<int>(layout::left)) +
         "\" y=\"28\" font-size=\"16\" font-weight=\"bold\">" + xml_escape(title) + "</text>\n";
}

/// Grid lines with their tick labels, the plot's border and the two axis titles.
inline void append_axes(std::string& svg, const plot_frame& frame) {
  using layout = plot_layout;
  for (const double t : ticks(frame.x_lo, frame.x_hi)) {
    append_formatted(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", frame.x(t),
                     layout::top, frame.x(t), layout::bottom);
    append_formatted(svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", frame.x(t),
                     layout::bottom + 18, t);
  }
  for (const double t : ticks(frame.y_lo, frame.y_hi)) {
    append_formatted(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", layout::left,
                     frame.y(t), layout::right, frame.y(t));
    append_formatted(svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", layout::left - 8,
                     frame.y(t) + 4, t);
  }
  append_formatted(svg, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
                   layout::left, layout::top, layout::right - layout::left, layout::bottom - layout::top);
  append_formatted(svg,
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">"
                   "mean active experts per layer and step (fewer = faster)</text>\n",
                   (layout::left + layout::right) / 2, layout::height - 25);
  append_formatted(svg,
                   "<text transform=\"translate(22 %.1f) rotate(-90)\" text-anchor=\"middle\">"
                   "mean retained gate mass (1 = vanilla)</text>\n",
                   (layout::top + layout::bottom) / 2);
}

/// The dashed line through the Pareto points, left to right (none for a single point).
inline void append_frontier(std::string& svg, const plot_frame& frame, const std::vector<plot_point>& points) {
  std::vector<plot_point> frontier = points | ranges::views::filter(&plot_point::pareto) | ranges::to<std::vector>();
  ranges::sort(frontier, std::less<>{}, &plot_point::active);
  if (frontier.size() <= 1) return;
  svg += "<polyline class=\"frontier\" fill=\"none\" stroke=\"#555\" stroke-dasharray=\"5 3\" points=\"";
  for (const auto& p : frontier) append_formatted(svg, "%.1f,%.1f ", frame.x(p.active), frame.y(p.retained));
  svg += "\"/>\n";
}

/// One circle per configuration, larger and outlined on the frontier, with its policy
/// text and values as a tooltip.
inline void append_points(std::string& svg, const plot_frame& frame, const std::vector<plot_point>& points) {
  for (const auto& p : points) {
    append_formatted(svg,
                     "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\" fill-opacity=\"0.8\" "
                     "stroke=\"%s\">",
                     frame.x(p.active), frame.y(p.retained), p.pareto ? 6 : 4,
                     series_colour(static_cast<std::size_t>(p.series)), p.pareto ? "black" : "none");
    append_formatted(svg, "<title>%s: |active| %.2f, retained %.4f</title></circle>\n", xml_escape(p.label).c_str(),
                     p.active, p.retained);
  }
}

/// A label's box in pixels, to keep labels from covering each other.
struct label_box {
  double x0, y0, x1, y1;
  bool overlaps(const label_box& other) const {
    return x0 < other.x1 && other.x0 < x1 && y0 < other.y1 && other.y0 < y1;
  }
};

/// Writes each point's tag beside it, in its grid's colour: above right of the point, or
/// the first of the other three corners where it covers no earlier label (the first
/// corner when every one does). Font size 10: about 6 pixels a character.
inline void append_labels(std::string& svg, const plot_frame& frame, const std::vector<plot_point>& points) {
  constexpr double char_width = 6, height = 11, gap = 6;
  std::vector<label_box> placed;
  for (const auto& p : points) {
    if (p.tag.empty()) continue;
    const double x = frame.x(p.active), y = frame.y(p.retained);
    const double width = char_width * static_cast<double>(p.tag.size());
    const label_box corners[] = {{x + gap, y - gap - height, x + gap + width, y - gap},
                                 {x + gap, y + gap, x + gap + width, y + gap + height},
                                 {x - gap - width, y - gap - height, x - gap, y - gap},
                                 {x - gap - width, y + gap, x - gap, y + gap + height}};
    label_box chosen = corners[0];
    for (const label_box& corner : corners) {
      if (ranges::none_of(placed, [&](const label_box& b) { return b.overlaps(corner); })) {
        chosen = corner;
        break;
      }
    }
    placed.push_back(chosen);
    append_formatted(svg, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"%s\">", chosen.x0,
                     chosen.y1 - 2, series_colour(static_cast<std::size_t>(p.series)));
    svg += xml_escape(p.tag) + "</text>\n";  // appended whole: a policy text may outgrow the buffer
  }
}

/// Each grid's colour and text in the right margin, then how the frontier is drawn.
inline void append_legend(std::string& svg, const std::vector<std::string>& series_names) {
  using layout = plot_layout;
  for (const auto& [s, name] : ranges::views::enumerate(series_names)) {
    const double y = layout::top + 10 + 20.0 * static_cast<double>(s);
    append_formatted(svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"/>\n", layout::right + 20, y,
                     series_colour(s));
    svg += "<text x=\"" + std::to_string(static_cast<int>(layout::right + 32)) + "\" y=\"" +
           std::to_string(static_cast<int>(y + 4)) + "\">" + xml_escape(name) + "</text>\n";
  }
  append_formatted(svg, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555\">outlined, dashed: Pareto frontier</text>\n",
                   layout::right + 14, layout::top + 20.0 + 20.0 * static_cast<double>(series_names.size()));
}

/// The whole plot of `points` (not empty), one colour per entry of `series_names`.
inline std::string pareto_svg(const std::vector<plot_point>& points, const std::vector<std::string>& series_names,
                              const std::string& title) {
  const plot_frame frame = frame_around(points);
  std::string svg;
  append_heading(svg, title);
  append_axes(svg, frame);
  append_frontier(svg, frame, points);
  append_points(svg, frame, points);
  append_labels(svg, frame, points);
  append_legend(svg, series_names);
  svg += "</svg>\n";
  return svg;
}

}  // namespace moe_route
