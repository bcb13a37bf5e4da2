import 'uplot/dist/uPlot.min.css';
import './base.css';
import './notebookWidget.css';
import './queue.css';
