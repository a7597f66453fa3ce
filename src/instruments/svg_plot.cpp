#include "instruments/svg_plot.hpp"

#include "io/format.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace bitgrad::instruments::svg {
namespace {

constexpr double kW = 660, kH = 330;                               // plot size
constexpr double kLeft = 72, kRight = 24, kTop = 34, kBottom = 48;  // margins

const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

std::string f2(double v) { return io::strprintf("%.1f", v); }

// "nice" linear ticks covering [lo, hi]
std::vector<double> ticks(double lo, double hi, int want) {
  const double span = hi - lo;
  const double raw = span / want;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

// Long series are drawn as the mean of consecutive groups of points (at most ~1000 per line).
Series thin(const Series& s, std::size_t& group) {
  group = 1;
  if (s.x.size() <= 2000) return s;
  group = (s.x.size() + 999) / 1000;
  Series o;
  o.name = s.name;
  o.markers = s.markers;
  for (std::size_t i = 0; i < s.x.size(); i += group) {
    const std::size_t e = std::min(s.x.size(), i + group);
    double sy = 0;
    std::size_t n = 0;
    for (std::size_t k = i; k < e; ++k)
      if (std::isfinite(s.y[k])) sy += s.y[k], ++n;
    o.x.push_back(s.x[e - 1]);
    o.y.push_back(n ? sy / static_cast<double>(n) : NAN);
  }
  return o;
}

}  // namespace

std::string escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return io::strprintf("%.4g", v);
}

const char* color(std::size_t i) { return kPalette[i % (sizeof kPalette / sizeof kPalette[0])]; }

std::string render(const LinePlot& p) {
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  std::vector<Series> ss;
  std::size_t group = 1;
  for (const Series& s : p.series) {
    std::size_t g;
    ss.push_back(thin(s, g));
    group = std::max(group, g);
  }
  auto usable = [&](double y) { return std::isfinite(y) && (!p.log_y || y > 0); };
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const Series& s : ss)
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!usable(s.y[i]) || !std::isfinite(s.x[i])) continue;
      x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
      const double y = p.log_y ? std::log10(s.y[i]) : s.y[i];
      y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  std::string o = "<figure><svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + f2(kW) + "\" height=\"" + f2(kH) +
                  "\" viewBox=\"0 0 " + f2(kW) + " " + f2(kH) + "\" role=\"img\" aria-label=\"" + escape(p.title) + "\">";
  o += "<text class=\"title\" x=\"" + f2(kLeft) + "\" y=\"20\">" + escape(p.title) + (group > 1 ? " (mean of every " + std::to_string(group) + " points)" : "") +
       "</text>";
  if (!(x0 <= x1)) {
    o += "<text class=\"empty\" x=\"" + f2(kW / 2) + "\" y=\"" + f2(kH / 2) + "\" text-anchor=\"middle\">no " +
         std::string(p.log_y ? "positive " : "") + "values to plot</text></svg></figure>\n";
    return o;
  }
  if (x0 == x1) x0 -= 1, x1 += 1;
  if (p.log_y) {
    y0 = std::floor(y0), y1 = std::ceil(y1);
    if (y0 == y1) y0 -= 1, y1 += 1;
  } else {
    const double pad = y1 > y0 ? 0.05 * (y1 - y0) : (y0 != 0 ? 0.1 * std::fabs(y0) : 1.0);
    y0 -= pad, y1 += pad;
  }
  auto X = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto Y = [&](double y) { return kTop + ph - ((p.log_y ? std::log10(y) : y) - y0) / (y1 - y0) * ph; };
  // frame, grid and ticks
  o += "<rect class=\"frame\" x=\"" + f2(kLeft) + "\" y=\"" + f2(kTop) + "\" width=\"" + f2(pw) + "\" height=\"" + f2(ph) + "\"/>";
  for (double t : ticks(x0, x1, 6)) {
    const double px = X(t);
    o += "<line class=\"grid\" x1=\"" + f2(px) + "\" y1=\"" + f2(kTop) + "\" x2=\"" + f2(px) + "\" y2=\"" + f2(kTop + ph) + "\"/>";
    o += "<text class=\"tick\" x=\"" + f2(px) + "\" y=\"" + f2(kTop + ph + 16) + "\" text-anchor=\"middle\">" + num(t) + "</text>";
  }
  std::vector<double> yt;
  if (p.log_y) {
    const int stride = std::max(1, static_cast<int>(std::ceil((y1 - y0) / 8)));
    for (double e = y0; e <= y1; e += stride) yt.push_back(e);
  } else {
    yt = ticks(y0, y1, 5);
  }
  for (double t : yt) {
    const double py = kTop + ph - (t - y0) / (y1 - y0) * ph;
    o += "<line class=\"grid\" x1=\"" + f2(kLeft) + "\" y1=\"" + f2(py) + "\" x2=\"" + f2(kLeft + pw) + "\" y2=\"" + f2(py) + "\"/>";
    o += "<text class=\"tick\" x=\"" + f2(kLeft - 6) + "\" y=\"" + f2(py + 4) + "\" text-anchor=\"end\">" +
         (p.log_y ? "1e" + std::to_string(static_cast<int>(t)) : num(t)) + "</text>";
  }
  o += "<text class=\"label\" x=\"" + f2(kLeft + pw / 2) + "\" y=\"" + f2(kH - 8) + "\" text-anchor=\"middle\">" + escape(p.xlabel) + "</text>";
  o += "<text class=\"label\" transform=\"translate(14 " + f2(kTop + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" + escape(p.ylabel) +
       (p.log_y ? " (log scale)" : "") + "</text>";
  // the series: polylines broken where a value cannot be drawn
  for (std::size_t k = 0; k < ss.size(); ++k) {
    const Series& s = ss[k];
    const std::string col = color(k);
    o += "<g class=\"series\" stroke=\"" + col + "\" fill=\"" + col + "\"><title>" + escape(s.name) + "</title>";
    std::string pts;
    auto flush = [&] {
      if (!pts.empty()) o += "<polyline fill=\"none\" points=\"" + pts + "\"/>";
      pts.clear();
    };
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!usable(s.y[i])) {
        flush();
        continue;
      }
      if (!pts.empty()) pts += ' ';
      pts += f2(X(s.x[i]));
      pts += ',';
      pts += f2(Y(s.y[i]));
      if (s.markers || s.x.size() == 1)
        o += "<circle cx=\"" + f2(X(s.x[i])) + "\" cy=\"" + f2(Y(s.y[i])) + "\" r=\"3\"><title>" + escape(s.name) + ": " + num(s.x[i]) + ", " +
             num(s.y[i]) + "</title></circle>";
    }
    flush();
    o += "</g>";
  }
  // legend, top right inside the frame, as wide as its longest name (about 6.6 px a character)
  if (ss.size() > 1 || !ss.front().name.empty()) {
    std::size_t longest = 0;
    for (const Series& s : ss) longest = std::max(longest, s.name.size());
    const double lw = std::min(pw - 10, 30 + 7.0 * static_cast<double>(longest)), lx = kLeft + pw - lw - 6;
    o += "<rect class=\"legendbox\" x=\"" + f2(lx) + "\" y=\"" + f2(kTop + 3) + "\" width=\"" + f2(lw) + "\" height=\"" +
         f2(15.0 * static_cast<double>(ss.size()) + 4) + "\"/>";
    double ly = kTop + 14;
    for (std::size_t k = 0; k < ss.size(); ++k, ly += 15) {
      o += "<rect x=\"" + f2(lx + 6) + "\" y=\"" + f2(ly - 5) + "\" width=\"12\" height=\"4\" fill=\"" + color(k) + "\"/>";
      o += "<text class=\"legend\" x=\"" + f2(lx + 24) + "\" y=\"" + f2(ly) + "\">" + escape(ss[k].name) + "</text>";
    }
  }
  o += "</svg></figure>\n";
  return o;
}

std::string render(const Heatmap& h) {
  const std::size_t n = h.values.size();
  const double cell = std::clamp(440.0 / static_cast<double>(std::max<std::size_t>(n, 1)), 10.0, 48.0);
  const double left = 150, top = 40;
  const double w = left + cell * static_cast<double>(n) + 20, hh = top + cell * static_cast<double>(n) + 30;
  double mx = 0;
  for (const auto& r : h.values)
    for (double v : r)
      if (std::isfinite(v)) mx = std::max(mx, v);
  std::string o = "<figure><svg class=\"plot heatmap\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + f2(w) + "\" height=\"" + f2(hh) +
                  "\" viewBox=\"0 0 " + f2(w) + " " + f2(hh) + "\" role=\"img\" aria-label=\"" + escape(h.title) + "\">";
  o += "<text class=\"title\" x=\"10\" y=\"20\">" + escape(h.title) + "</text>";
  for (std::size_t i = 0; i < n; ++i) {
    const std::string lab = i < h.labels.size() ? h.labels[i] : std::to_string(i + 1);
    o += "<text class=\"tick\" x=\"" + f2(left - 6) + "\" y=\"" + f2(top + cell * (static_cast<double>(i) + 0.5) + 4) + "\" text-anchor=\"end\">" +
         escape(lab) + "</text>";
    if (cell >= 18)
      o += "<text class=\"tick\" x=\"" + f2(left + cell * (static_cast<double>(i) + 0.5)) + "\" y=\"" + f2(top - 6) + "\" text-anchor=\"middle\">" +
           std::to_string(i + 1) + "</text>";
    for (std::size_t j = 0; j < n && j < h.values[i].size(); ++j) {
      const double v = h.values[i][j];
      // zero: green; otherwise orange to dark red with the order of magnitude relative to the largest
      std::string fill = "#c7e9c0";
      if (v != 0) {
        double t = 1;
        if (std::isfinite(v) && mx > 0) t = std::clamp(1 + std::log10(v / mx) / 8, 0.0, 1.0);
        const int r = static_cast<int>(253 - 90 * t), g = static_cast<int>(174 - 160 * t), b = static_cast<int>(97 - 80 * t);
        fill = io::strprintf("#%02x%02x%02x", r, g, b);
      }
      const double x = left + cell * static_cast<double>(j), y = top + cell * static_cast<double>(i);
      o += "<rect class=\"cell\" x=\"" + f2(x) + "\" y=\"" + f2(y) + "\" width=\"" + f2(cell - 1) + "\" height=\"" + f2(cell - 1) + "\" fill=\"" + fill +
           "\"><title>run " + std::to_string(i + 1) + " vs run " + std::to_string(j + 1) + ": " + num(v) + "</title></rect>";
      if (cell >= 30)
        o += "<text class=\"cellv\" x=\"" + f2(x + cell / 2) + "\" y=\"" + f2(y + cell / 2 + 4) + "\" text-anchor=\"middle\">" + num(v) + "</text>";
    }
  }
  o += "</svg></figure>\n";
  return o;
}

}  // namespace bitgrad::instruments::svg
