// Inline SVG plots for `bitgrad report`: line plots (linear or log y) and heatmaps. Each plot
// is one <svg class="plot"> element with its title; values are in <title> tooltips, so the page
// needs no script to be read.
#pragma once

#include <string>
#include <vector>

namespace bitgrad::instruments::svg {

struct Series {
  std::string name;
  std::vector<double> x, y;
  bool markers = false;  // draw a dot at each point (sparse series such as per-epoch accuracy)
};

struct LinePlot {
  std::string title, xlabel, ylabel;
  bool log_y = false;  // non-positive values are left out (a gap in the line)
  std::vector<Series> series;
};
std::string render(const LinePlot& p);

struct Heatmap {
  std::string title;
  std::vector<std::string> labels;          // one per row and column
  std::vector<std::vector<double>> values;  // square
};
std::string render(const Heatmap& h);

std::string escape(const std::string& s);  // HTML / XML text and attribute escaping
std::string num(double v);                 // compact number: %.4g, "inf", "nan"
const char* color(std::size_t i);          // the series palette

}  // namespace bitgrad::instruments::svg
